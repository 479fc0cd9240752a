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

constexpr int kMaxUnknowns = 9;
constexpr double kMinPerByte = 1e-13;  // 10 TB/s: the floor of a fitted per-byte cost (a rate must stay finite)
constexpr int kReweightings = 30;      // iterations of the least-absolute-error fit
constexpr double kMinResidual = 1e-3;  // residuals below 0.1 % weigh as 0.1 % (the reweighting's floor)

struct Row {
  std::array<double, kMaxUnknowns> a{};
  double y = 0;
};
using Vec = std::array<double, kMaxUnknowns>;

// The weighted normal equations of `rows`: g = A'WA, b = A'Wy, c = y'Wy.
struct Gram {
  std::array<Vec, kMaxUnknowns> g{};
  Vec b{};
  double c = 0;
};

Gram MakeGram(const std::vector<Row>& rows, const std::vector<double>& w, int k) {
  Gram out;
  for (size_t r = 0; r < rows.size(); ++r) {
    const Row& row = rows[r];
    for (int i = 0; i < k; ++i) {
      for (int j = 0; j < k; ++j) out.g[i][j] += w[r] * row.a[i] * row.a[j];
      out.b[i] += w[r] * row.a[i] * row.y;
    }
    out.c += w[r] * row.y * row.y;
  }
  return out;
}

// Least squares over the unknowns in `free` (the others held at 0); false when singular.
bool SolveSubset(const Gram& gram, int k, unsigned free, Vec* x) {
  std::vector<int> idx;
  for (int j = 0; j < k; ++j) {
    if (free & (1u << j)) idx.push_back(j);
  }
  const size_t f = idx.size();
  std::vector<std::vector<double>> m(f, std::vector<double>(f + 1, 0));
  double diag = 0;
  for (size_t i = 0; i < f; ++i) {
    for (size_t j = 0; j < f; ++j) m[i][j] = gram.g[idx[i]][idx[j]];
    m[i][f] = gram.b[idx[i]];
    diag = std::max(diag, m[i][i]);
  }
  for (size_t c = 0; c < f; ++c) {  // Gauss-Jordan with partial pivoting
    size_t piv = c;
    for (size_t r = c + 1; r < f; ++r) {
      if (std::fabs(m[r][c]) > std::fabs(m[piv][c])) piv = r;
    }
    if (std::fabs(m[piv][c]) <= 1e-12 * diag) return false;
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

// Non-negative least squares in k <= 9 unknowns: the best feasible subset solution (its squared error from the
// normal equations, x'Gx - 2x'b + c).
Vec NnlsGram(const Gram& gram, int k) {
  Vec best{};
  double best_err = std::numeric_limits<double>::infinity();
  for (unsigned free = 0; free < (1u << k); ++free) {
    Vec x{};
    if (free != 0 && !SolveSubset(gram, k, free, &x)) continue;
    if (std::any_of(x.begin(), x.end(), [](double v) { return v < 0; })) continue;
    double err = gram.c;
    for (int i = 0; i < k; ++i) {
      err -= 2 * x[i] * gram.b[i];
      for (int j = 0; j < k; ++j) err += x[i] * gram.g[i][j] * x[j];
    }
    if (err < best_err) best_err = err, best = x;
  }
  return best;
}

// Non-negative least absolute error in k <= 9 unknowns, by iteratively reweighted least squares (weights
// 1/|residual|): a few measurements far off — a rank that lost its core for a scheduler tick — do not pull every
// prediction as they would a least-squares fit. Each column is scaled to unit norm first (seconds per byte and
// seconds per call differ by ten orders of magnitude) and the solution scaled back.
Vec Nnls(std::vector<Row> rows, int k) {
  Vec scale{};
  for (int j = 0; j < k; ++j) {
    double sum = 0;
    for (const Row& r : rows) sum += r.a[j] * r.a[j];
    scale[j] = sum > 0 ? 1.0 / std::sqrt(sum) : 1.0;
    for (Row& r : rows) r.a[j] *= scale[j];
  }
  std::vector<double> w(rows.size(), 1.0);
  Vec best{};
  double best_abs = std::numeric_limits<double>::infinity();
  for (int it = 0; it < kReweightings && !rows.empty(); ++it) {
    const Vec x = NnlsGram(MakeGram(rows, w, k), k);
    double abs_err = 0;
    for (size_t r = 0; r < rows.size(); ++r) {
      double p = 0;
      for (int j = 0; j < k; ++j) p += rows[r].a[j] * x[j];
      const double e = std::fabs(p - rows[r].y);
      abs_err += e;
      w[r] = 1.0 / std::max(e, kMinResidual);
    }
    if (abs_err < best_abs) best_abs = abs_err, best = x;
  }
  for (int j = 0; j < k; ++j) best[j] *= scale[j];
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

namespace {

// The part of a version 2 prediction that is neither the node's link nor the network: reduction, mailbox
// exchanges and the wait for a core.
double Rest(const Terms& t, const ClusterProfile& p) {
  return t.calls * p.call_s + t.reduced * p.gamma_s + t.exchanges * p.mailbox_s + WaitSeconds(t, p.oversubscribed);
}

// A median whose configuration parses: what the fit prices.
struct Point {
  Measurement m;
  Configuration config;
};

absl::StatusOr<Terms> PointTerms(const Point& pt, const FitOptions& options, uint64_t single_copy) {
  const Shape& s = pt.m.shape;
  return ConfigTerms(pt.m.collective, pt.config, s, pt.m.bytes,
                     {options.nics_per_node, options.cores_per_node, kProfileVersion, pt.config.link.kind,
                      options.cores_shared, SingleCopyBytesAt(single_copy, s.ranks_per_node, options.cores_per_node)});
}

// The rows of the fit inside a node (alpha, o, beta, gamma, mailbox, the three waits for a core, the call).
std::vector<Row> IntraRows(const std::vector<std::pair<Terms, double>>& intra) {
  std::vector<Row> rows;
  for (const auto& [t, y] : intra) {
    const double ov = t.excess;
    rows.push_back({{t.s_intra / y, t.k_intra / y, t.b_intra / y, t.reduced / y, t.exchanges / y, ov / y,
                     ov * t.rounds() / y, ov * t.wait_bytes() / y, t.calls / y},
                    1.0});
  }
  return rows;
}

double SumAbsError(const std::vector<Row>& rows, const Vec& x) {
  double sum = 0;
  for (const Row& r : rows) {
    double p = 0;
    for (int j = 0; j < kMaxUnknowns; ++j) p += r.a[j] * x[j];
    sum += std::fabs(p - r.y);
  }
  return sum;
}

// The one-node points over shm at `single_copy` (the profile's single_copy_bytes).
std::vector<std::pair<Terms, double>> IntraAt(const std::vector<Point>& points, const FitOptions& options,
                                              uint64_t single_copy) {
  std::vector<std::pair<Terms, double>> out;
  for (const Point& pt : points) {
    auto t = PointTerms(pt, options, single_copy);
    if (t.ok()) out.emplace_back(*t, pt.m.seconds);
  }
  return out;
}

// The single-copy size that fits the one-node points best: none (0), or each size they measured (from it on,
// receivers read by single copy). Only the algorithms with a `pulled` cost tell them apart; a tie keeps none.
uint64_t FitSingleCopy(const std::vector<Point>& points, const FitOptions& options) {
  std::vector<uint64_t> sizes;
  for (const Point& pt : points) sizes.push_back(pt.m.bytes);
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  uint64_t best = 0;
  std::vector<Row> rows = IntraRows(IntraAt(points, options, 0));
  double best_err = SumAbsError(rows, Nnls(rows, kMaxUnknowns)) * (1 - 1e-9);
  for (uint64_t size : sizes) {
    if (size == 0) continue;
    rows = IntraRows(IntraAt(points, options, size));
    const double err = SumAbsError(rows, Nnls(rows, kMaxUnknowns));
    if (err < best_err) best_err = err, best = size;
  }
  return best;
}

}  // namespace

absl::StatusOr<FitResult> Fit(absl::Span<const Measurement> measurements, const FitOptions& options) {
  FitResult out;
  std::vector<Point> intra_points, others;
  for (const Measurement& m : Medians(measurements)) {
    auto config = Configuration::Parse(m.configuration);
    absl::StatusOr<Terms> t = absl::NotFoundError("");
    if (config.ok() && m.seconds > 0) t = PointTerms({m, *config}, options, 0);
    if (!t.ok()) {
      ++out.skipped;
      continue;
    }
    (m.shape.nodes > 1 || t->tcp ? others : intra_points).push_back({m, *config});
  }
  const uint64_t single_copy = options.single_copy_bytes >= 0 ? static_cast<uint64_t>(options.single_copy_bytes)
                               : intra_points.empty()         ? 0
                                                              : FitSingleCopy(intra_points, options);
  const std::vector<std::pair<Terms, double>> intra = IntraAt(intra_points, options, single_copy);
  std::vector<std::pair<Terms, double>> tcp, inter;
  for (const Point& pt : others) {
    auto t = PointTerms(pt, options, single_copy);
    if (t.ok()) (pt.m.shape.nodes > 1 ? inter : tcp).emplace_back(*t, pt.m.seconds);
  }
  if (intra.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("no one-node measurement over shared memory to fit the link inside a node (", tcp.size(),
                     " over tcp, ", inter.size(), " across nodes, ", out.skipped, " unusable)"));
  }
  // Inside a node over shm: alpha, o, beta, gamma, the mailbox exchange, the three waits for a core and the call.
  std::vector<Row> rows = IntraRows(intra);
  const auto xi = Nnls(rows, kMaxUnknowns);
  ClusterProfile& p = out.profile;
  p.name = options.name;
  p.version = kProfileVersion;
  p.nics_per_node = options.nics_per_node;
  p.cores_per_node = options.cores_per_node;
  p.cores_shared = options.cores_shared;
  p.intra = {xi[0], xi[1], std::max(xi[2], kMinPerByte)};
  p.gamma_s = std::max(xi[3], kMinPerByte);
  p.mailbox_s = xi[4];
  p.oversubscribed = {xi[5], xi[6], xi[7]};
  p.call_s = xi[8];
  p.single_copy_bytes = single_copy;
  out.intra_points = intra.size();
  out.tcp_points = tcp.size();
  out.inter_points = inter.size();
  // link=tcp inside a node: its own alpha, o and beta, the rest as fitted over shm.
  p.intra_tcp_known = !tcp.empty();
  if (p.intra_tcp_known) {
    rows.clear();
    for (const auto& [t, y] : tcp)
      rows.push_back({{t.s_intra / y, t.k_intra / y, t.b_intra / y}, 1.0 - Rest(t, p) / y});
    const auto xt = Nnls(rows, 3);
    p.intra_tcp = {xt[0], xt[1], std::max(xt[2], kMinPerByte)};
  }
  p.inter_known = !inter.empty();
  if (!p.inter_known) return out;
  rows.clear();
  for (const auto& [t, y] : inter) {
    const double inside =
        t.s_intra * p.intra.alpha_s + t.k_intra * p.intra.overhead_s + t.b_intra * p.intra.beta_s + Rest(t, p);
    const double e = t.excess;
    rows.push_back(
        {{t.s_inter / y, t.k_inter / y, t.b_inter / y, e * t.inter_calls / y, e * t.s_inter / y, e * t.b_inter / y},
         1.0 - inside / y});
  }
  const auto xn = Nnls(rows, 6);
  p.inter = {xn[0], xn[1], std::max(xn[2], kMinPerByte)};
  p.inter_oversubscribed = {xn[3], xn[4], xn[5]};
  return out;
}

}  // namespace hccltune::model
