// hccl_tune_torch._C — the Python binding of ProcessGroupHcclTune. hccl_tune_torch/__init__.py registers it
// with torch.distributed; users never import this module directly.
#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "hccltune/version.h"
#include "python/csrc/links.h"
#include "python/csrc/process_group.h"
#include "python/csrc/symmetric.h"
#include "runtime/common/config.h"

namespace py = pybind11;
using hccltune::torch_backend::ProcessGroupHcclTune;

PYBIND11_MODULE(_C, m) {
  m.doc() = "hccl-tune's c10d ProcessGroup (backend 'hccltune')";
  // The base class must be registered with pybind11 before ours derives from it.
  py::module_::import("torch.distributed");

  py::class_<ProcessGroupHcclTune, c10d::ProcessGroup, c10::intrusive_ptr<ProcessGroupHcclTune>>(m,
                                                                                                 "ProcessGroupHcclTune")
      .def(py::init(
               [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, std::chrono::milliseconds timeout) {
                 return ProcessGroupHcclTune::Create(store, rank, size, timeout);
               }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
           py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("fingerprint", [](ProcessGroupHcclTune& pg) { return pg.communicator().fingerprint(); })
      .def_property_readonly("num_nodes", [](ProcessGroupHcclTune& pg) { return pg.communicator().num_nodes(); })
      .def("last_config", [](ProcessGroupHcclTune& pg) { return pg.communicator().last_config(); })
      .def("fallback_allocations", [](ProcessGroupHcclTune& pg) { return pg.communicator().fallback_allocations(); })
      // The link inspector (hccl_tune_torch.LinkInspector): a collective measurement, and this rank's links in use.
      .def("measure_links", &hccltune::torch_backend::MeasureLinksJson, py::arg("bytes"), py::arg("iters"),
           py::call_guard<py::gil_scoped_release>())
      .def("stored_links", &hccltune::torch_backend::StoredLinksJson, py::call_guard<py::gil_scoped_release>())
      .def("links_used", &hccltune::torch_backend::LinksUsedJson, py::call_guard<py::gil_scoped_release>())
      // Collective: a 1-D uint8 tensor of `nbytes` in symmetric memory (Communicator::AllocSymmetric); see
      // hccl_tune_torch.empty_symmetric. Freed when the last tensor on it goes, if the group still exists.
      .def(
          "alloc_symmetric",
          [](const c10::intrusive_ptr<ProcessGroupHcclTune>& pg, int64_t nbytes) {
            return hccltune::torch_backend::AllocSymmetricTensor(pg, nbytes);
          },
          py::arg("nbytes"), py::call_guard<py::gil_scoped_release>());

  // HCCL_TUNE_TORCH_ALIAS alone, read by the config module like every variable: a bad value elsewhere must not
  // drop the `hccl` name (creating the group reports it, naming the variable). Raises ValueError on a bad
  // HCCL_TUNE_TORCH_ALIAS (the message names it).
  m.def("torch_alias", [] {
    auto alias = hccltune::Environment::LoadTorchAlias();
    if (!alias.ok()) throw py::value_error(std::string(alias.status().message()));
    return *alias;
  });
  m.attr("__version__") = HCCL_TUNE_VERSION;
}
