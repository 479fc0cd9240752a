#include "python/csrc/sparse.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "python/csrc/layout.h"

namespace hccltune::torch_backend {
namespace {

// What every rank contributes first: enough to size the later allgathers and to check the ranks agree.
struct Meta {
  int64_t nnz, sparse_dim, dense_dim, ndim, dtype;
};
static_assert(sizeof(Meta) == 5 * sizeof(int64_t));

std::string Describe(const Meta& m, const std::vector<int64_t>* sizes) {
  std::string s = absl::StrCat("sparse_dim ", m.sparse_dim, ", dense_dim ", m.dense_dim, ", ");
  if (sizes != nullptr) {
    absl::StrAppend(&s, "shape [", absl::StrJoin(*sizes, ", "), "]");
  } else {
    absl::StrAppend(&s, m.ndim, " dims");
  }
  absl::StrAppend(&s, ", dtype ", c10::toString(static_cast<at::ScalarType>(m.dtype)));
  return s;
}

}  // namespace

absl::Status SparseAllreduceSum(Communicator& comm, const at::Tensor& input, at::Tensor& output) {
  const int n = comm.size();
  const Meta mine{input._nnz(), input.sparse_dim(), input.dense_dim(), input.dim(),
                  static_cast<int64_t>(input.scalar_type())};
  std::vector<Meta> metas(static_cast<size_t>(n));
  if (absl::Status s = comm.Allgather(&mine, metas.data(), 5, DataType::kInt64); !s.ok()) return s;
  for (int r = 1; r < n; ++r) {
    const Meta& m = metas[static_cast<size_t>(r)];
    const Meta& m0 = metas[0];
    if (m.sparse_dim != m0.sparse_dim || m.dense_dim != m0.dense_dim || m.ndim != m0.ndim || m.dtype != m0.dtype) {
      return absl::InvalidArgumentError(absl::StrCat("sparse all_reduce: rank ", r, "'s tensor (", Describe(m, nullptr),
                                                     ") differs from rank 0's (", Describe(m0, nullptr), ")"));
    }
  }
  const std::vector<int64_t> my_sizes = input.sizes().vec();
  std::vector<int64_t> sizes(static_cast<size_t>(n * mine.ndim));
  if (mine.ndim > 0) {
    if (absl::Status s = comm.Allgather(my_sizes.data(), sizes.data(), my_sizes.size(), DataType::kInt64); !s.ok()) {
      return s;
    }
  }
  const std::vector<int64_t> first(sizes.begin(), sizes.begin() + mine.ndim);
  for (int r = 1; r < n; ++r) {
    const std::vector<int64_t> other(sizes.begin() + r * mine.ndim, sizes.begin() + (r + 1) * mine.ndim);
    if (other != first) {
      return absl::InvalidArgumentError(absl::StrCat("sparse all_reduce: rank ", r, "'s tensor (",
                                                     Describe(metas[static_cast<size_t>(r)], &other),
                                                     ") differs from rank 0's (", Describe(metas[0], &first), ")"));
    }
  }

  // Indices: [sparse_dim, nnz] int64 per rank; values: [nnz, dense sizes...] per rank. Both travel as bytes.
  const at::Tensor indices = input._indices().contiguous();
  const at::Tensor values = input._values().contiguous();
  int64_t dense_numel = 1;
  for (int64_t d = mine.sparse_dim; d < mine.ndim; ++d) dense_numel *= my_sizes[static_cast<size_t>(d)];
  const auto index_bytes = static_cast<size_t>(mine.sparse_dim) * sizeof(int64_t);
  const auto value_bytes = static_cast<size_t>(dense_numel * values.element_size());
  std::vector<size_t> index_counts(static_cast<size_t>(n)), value_counts(static_cast<size_t>(n));
  int64_t total_nnz = 0;
  for (int r = 0; r < n; ++r) {
    const auto nnz = static_cast<size_t>(metas[static_cast<size_t>(r)].nnz);
    index_counts[static_cast<size_t>(r)] = nnz * index_bytes;
    value_counts[static_cast<size_t>(r)] = nnz * value_bytes;
    total_nnz += static_cast<int64_t>(nnz);
  }
  std::vector<int64_t> value_shape = values.sizes().vec();
  value_shape[0] = total_nnz;
  at::Tensor all_values = at::empty(value_shape, values.options());
  std::vector<uint8_t> all_indices(static_cast<size_t>(total_nnz) * index_bytes);
  if (total_nnz > 0) {
    // Every rank knows every count, so all ranks skip or run these calls together.
    if (index_bytes > 0) {
      absl::Status s = comm.Allgatherv(indices.data_ptr(), all_indices.data(), index_counts,
                                       Displacements(index_counts), DataType::kUint8);
      if (!s.ok()) return s;
    }
    if (value_bytes > 0) {
      absl::Status s = comm.Allgatherv(values.data_ptr(), all_values.data_ptr(), value_counts,
                                       Displacements(value_counts), DataType::kUint8);
      if (!s.ok()) return s;
    }
  }
  // Rank r's indices arrive as one [sparse_dim, nnz_r] block; the sum's indices are those blocks side by side.
  std::vector<at::Tensor> blocks;
  size_t off = 0;
  for (int r = 0; r < n; ++r) {
    const int64_t nnz = metas[static_cast<size_t>(r)].nnz;
    blocks.push_back(at::from_blob(all_indices.data() + off, {mine.sparse_dim, nnz}, at::kLong));
    off += index_counts[static_cast<size_t>(r)];
  }
  const at::Tensor all_idx = at::cat(blocks, 1);  // a copy: owns its memory
  const at::Tensor sum =
      at::sparse_coo_tensor(all_idx, all_values, my_sizes, values.options().layout(at::kSparse)).coalesce();
  output.copy_(sum);
  return absl::OkStatus();
}

}  // namespace hccltune::torch_backend
