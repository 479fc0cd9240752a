#include "tuner/cli/svg_plot.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "runtime/common/sizes.h"

namespace hccltune::cli {

std::string HtmlEscape(absl::string_view s) {
  return absl::StrReplaceAll(s, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\"", "&quot;"}});
}

namespace {

const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                         "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"};

}  // namespace

std::string Plot(const std::string& title, const std::map<std::string, Curve>& curves,
                 const std::vector<db::TunedEntry>& winners) {
  const double W = 820, H = 380, L = 70, R = 20, T = 30, B = 50;
  uint64_t lo = UINT64_MAX, hi = 0;
  double ymax = 0;
  for (const auto& [alg, c] : curves) {
    for (const auto& [b, v] : c.best) {
      lo = std::min(lo, std::max<uint64_t>(b, 1));
      hi = std::max(hi, std::max<uint64_t>(b, 1));
      ymax = std::max(ymax, v.first);
    }
  }
  if (hi == 0) return "";
  if (hi == lo) hi = lo * 2;
  ymax = ymax > 0 ? ymax * 1.1 : 1;
  const double llo = std::log2(static_cast<double>(lo)), lhi = std::log2(static_cast<double>(hi));
  auto X = [&](double bytes) { return L + (std::log2(std::max(bytes, 1.0)) - llo) / (lhi - llo) * (W - L - R); };
  auto Y = [&](double v) { return H - B - v / ymax * (H - T - B); };
  std::string s = absl::StrFormat(
      "<h2>%s</h2>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n",
      HtmlEscape(title), W + 260, H);
  // Winner bands.
  int band = 0;
  for (const auto& e : winners) {
    const double x0 = std::max(L, X(static_cast<double>(std::max<uint64_t>(e.key.range.min, lo))));
    const double x1 = std::min(W - R, X(static_cast<double>(std::min<uint64_t>(e.key.range.max, hi * 2)) / 1.0001));
    if (x1 <= x0) continue;
    absl::StrAppendFormat(&s,
                          "<rect x=\"%.1f\" y=\"%.0f\" width=\"%.1f\" height=\"%.0f\" fill=\"%s\" opacity=\"0.08\">"
                          "<title>%s %s: %s</title></rect>\n"
                          "<text x=\"%.1f\" y=\"%.0f\" fill=\"#444\">winner: %s</text>\n",
                          x0, T, x1 - x0, H - T - B, band % 2 ? "#000" : "#06c",
                          HtmlEscape(FormatByteRange(e.key.range)), "winner", HtmlEscape(e.configuration), x0 + 2,
                          T - 6 + (band % 2) * 12, HtmlEscape(e.configuration.substr(0, e.configuration.find('('))));
    ++band;
  }
  // Axes.
  absl::StrAppendFormat(&s, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"#000\"/>\n", L, H - B,
                        W - R, H - B);
  absl::StrAppendFormat(&s, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"#000\"/>\n", L, T, L,
                        H - B);
  for (uint64_t b = lo; b <= hi; b *= 4) {
    absl::StrAppendFormat(&s, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%s</text>\n",
                          X(static_cast<double>(b)), H - B + 15, FormatBytes(b));
  }
  for (int i = 0; i <= 4; ++i) {
    const double v = ymax * i / 4;
    absl::StrAppendFormat(&s, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%.2f</text>\n", L - 5, Y(v) + 4, v);
  }
  absl::StrAppendFormat(&s, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">bytes</text>\n", (L + W) / 2, H - 12);
  absl::StrAppendFormat(&s, "<text x=\"14\" y=\"%.0f\" transform=\"rotate(-90 14 %.0f)\">busbw GB/s</text>\n", H / 2,
                        H / 2);
  int k = 0;
  for (const auto& [alg, c] : curves) {
    const char* color = kColors[k % (sizeof(kColors) / sizeof(kColors[0]))];
    std::string pts;
    for (const auto& [b, v] : c.best) absl::StrAppendFormat(&pts, "%.1f,%.1f ", X(static_cast<double>(b)), Y(v.first));
    absl::StrAppendFormat(&s, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"%s\"/>\n", color, pts);
    for (const auto& [b, v] : c.best) {
      absl::StrAppendFormat(&s,
                            "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"><title>%s %s: %.3f GB/s</title>"
                            "</circle>\n",
                            X(static_cast<double>(b)), Y(v.first), color, FormatBytes(b), HtmlEscape(v.second),
                            v.first);
    }
    absl::StrAppendFormat(&s,
                          "<rect x=\"%.0f\" y=\"%d\" width=\"12\" height=\"3\" fill=\"%s\"/>"
                          "<text x=\"%.0f\" y=\"%d\">%s</text>\n",
                          W + 10, 40 + 16 * k, color, W + 28, 44 + 16 * k, HtmlEscape(alg));
    ++k;
  }
  s += "</svg>\n";
  return s;
}

}  // namespace hccltune::cli
