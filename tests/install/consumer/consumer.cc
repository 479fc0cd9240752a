// A program outside the project that uses the installed headers and libraries (C++17, as torch's are).
#include <cstdio>

#include "runtime/common/configuration.h"
#include "runtime/common/types.h"

int main() {
  auto c = hccltune::Configuration::Parse("ring(chunk=1M)");
  if (!c.ok()) return 1;
  std::printf("%s %s %s\n", std::string(hccltune::CollectiveName(hccltune::Collective::kAllreduce)).c_str(),
              std::string(hccltune::DataTypeName(hccltune::DataType::kFloat32)).c_str(), c->ToString().c_str());
  return 0;
}
