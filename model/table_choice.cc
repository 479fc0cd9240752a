#include "model/table_choice.h"

#include "runtime/common/config.h"
#include "runtime/selector/selector.h"

namespace hccltune::model {

Configuration BuiltinDefault(Collective c, const Shape& shape, uint64_t bytes) {
  auto selector = Selector::Create(Environment{}, shape.ranks(), NodeMajorTopology(shape));
  if (!selector.ok()) return Configuration{};
  return *selector->Choose(c, DataType::kFloat32, bytes).config;
}

TableChoice ChooseForTable(const ClusterProfile& profile, Collective c, const Shape& shape, uint64_t bytes,
                           const std::vector<Candidate>& ranked) {
  TableChoice out;
  out.fastest = out.chosen = ranked.front();
  const Configuration builtin = BuiltinDefault(c, shape, bytes);
  out.builtin.config = builtin.ToString();
  auto t = PredictSeconds(profile, c, builtin, shape, bytes);
  if (!t.ok()) return out;
  out.builtin.seconds = *t;
  if (out.builtin.config != out.fastest.config && *t <= out.fastest.seconds * (1 + kKeepDefaultMargin)) {
    out.chosen = out.builtin;
    out.kept_default = true;
  }
  return out;
}

}  // namespace hccltune::model
