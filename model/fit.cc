#include "model/fit.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "runtime/common/configuration.h"

namespace hccltune::model {
namespace {

constexpr int kMaxUnknowns = 4;
constexpr double kMinPerByte = 1e-13;  // 10 TB/s: the floor of a fitted per-byte cost (a rate must stay finite)

struct Row {
  std::array<double, kMaxUnknowns> a{};
  double y = 0;
};

// Least squares over the unknowns in `free` (the others held at 0); false when singular.
bool SolveSubset(const std::vector<Row>& rows, int k, unsigned free, std::array<double, kMaxUnknowns>* x) {
  std::vector<int> idx;
  for (int j = 0; j < k; ++j) {
    if (free & (1u << j)) idx.push_back(j);
  }
  const size_t f = idx.size();
  std::vector<std::vector<double>> m(f, std::vector<double>(f + 1, 0));
  for (const Row& r : rows) {
    for (size_t i = 0; i < f; ++i) {
      for (size_t j = 0; j < f; ++j) m[i][j] += r.a[idx[i]] * r.a[idx[j]];
      m[i][f] += r.a[idx[i]] * r.y;
    }
  }
  for (size_t c = 0; c < f; ++c) {  // Gauss-Jordan with partial pivoting
    size_t piv = c;
    for (size_t r = c + 1; r < f; ++r) {
      if (std::fabs(m[r][c]) > std::fabs(m[piv][c])) piv = r;
    }
    if (std::fabs(m[piv][c]) < 1e-300) return false;
    std::swap(m[c], m[piv]);
    for (size_t r = 0; r < f; ++r) {
      if (r == c) continue;
      const double q = m[r][c] / m[c][c];
      for (size_t j = c; j <= f; ++j) m[r][j] -= q * m[c][j];
    }
  }
  x->fill(0);
  for (size_t i = 0; i < f; ++i) (*x)[idx[i]] = m[i][f] / m[i][i];
  return true;
}

// Non-negative least squares in k <= 4 unknowns: the best feasible subset solution.
std::array<double, kMaxUnknowns> Nnls(const std::vector<Row>& rows, int k) {
  std::array<double, kMaxUnknowns> best{};
  double best_err = std::numeric_limits<double>::infinity();
  for (unsigned free = 0; free < (1u << k); ++free) {
    std::array<double, kMaxUnknowns> x{};
    if (free != 0 && !SolveSubset(rows, k, free, &x)) continue;
    if (std::any_of(x.begin(), x.end(), [](double v) { return v < 0; })) continue;
    double err = 0;
    for (const Row& r : rows) {
      double p = 0;
      for (int j = 0; j < k; ++j) p += r.a[j] * x[j];
      err += (p - r.y) * (p - r.y);
    }
    if (err < best_err) best_err = err, best = x;
  }
  return best;
}

}  // namespace

std::vector<Measurement> Medians(absl::Span<const Measurement> measurements) {
  std::map<std::tuple<int, std::string, int, int, uint64_t>, std::vector<const Measurement*>> groups;
  for (const Measurement& m : measurements) {
    groups[{static_cast<int>(m.collective), m.configuration, m.shape.nodes, m.shape.ranks_per_node, m.bytes}].push_back(
        &m);
  }
  std::vector<Measurement> out;
  for (auto& [key, ms] : groups) {
    std::sort(ms.begin(), ms.end(), [](auto* a, auto* b) { return a->seconds < b->seconds; });
    Measurement med = *ms[ms.size() / 2];
    if (ms.size() % 2 == 0) med.seconds = (ms[ms.size() / 2 - 1]->seconds + ms[ms.size() / 2]->seconds) / 2;
    out.push_back(med);
  }
  return out;
}

absl::StatusOr<FitResult> Fit(absl::Span<const Measurement> measurements, const FitOptions& options) {
  FitResult out;
  std::vector<std::pair<Terms, double>> intra, inter;
  for (const Measurement& m : Medians(measurements)) {
    auto config = Configuration::Parse(m.configuration);
    absl::StatusOr<Terms> t = absl::NotFoundError("");
    if (config.ok() && m.seconds > 0) {
      t = CostTerms(m.collective, config->algorithm, config->chunk, m.shape, m.bytes, options.nics_per_node,
                    options.cores_per_node);
    }
    if (!t.ok()) {
      ++out.skipped;
      continue;
    }
    (m.shape.nodes > 1 ? inter : intra).emplace_back(*t, m.seconds);
  }
  if (intra.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("no one-node measurement to fit the link inside a node (",
                                                   inter.size(), " across nodes, ", out.skipped, " unusable)"));
  }
  std::vector<Row> rows;
  for (const auto& [t, y] : intra) {
    rows.push_back(
        {{t.factor * t.s_intra / y, t.factor * t.k_intra / y, t.factor * t.b_intra / y, t.factor * t.reduced / y},
         1.0});
  }
  const auto xi = Nnls(rows, 4);
  ClusterProfile& p = out.profile;
  p.name = options.name;
  p.nics_per_node = options.nics_per_node;
  p.cores_per_node = options.cores_per_node;
  p.intra = {xi[0], xi[1], std::max(xi[2], kMinPerByte)};
  p.gamma_s = std::max(xi[3], kMinPerByte);
  out.intra_points = intra.size();
  out.inter_points = inter.size();
  p.inter_known = !inter.empty();
  if (!p.inter_known) return out;
  rows.clear();
  for (const auto& [t, y] : inter) {
    const double inside = t.factor * (t.s_intra * p.intra.alpha_s + t.k_intra * p.intra.overhead_s +
                                      t.b_intra * p.intra.beta_s + t.reduced * p.gamma_s);
    rows.push_back(
        {{t.factor * t.s_inter / y, t.factor * t.k_inter / y, t.factor * t.b_inter / y, 0}, 1.0 - inside / y});
  }
  const auto xn = Nnls(rows, 3);
  p.inter = {xn[0], xn[1], std::max(xn[2], kMinPerByte)};
  return out;
}

}  // namespace hccltune::model
