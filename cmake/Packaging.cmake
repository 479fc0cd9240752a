# Debian packages with CPack (deploy/package.sh builds them; tests/systemd/package_test.sh installs them):
#   hccl-tune          the CLI, the runtime libraries, headers, CMake package and pkg-config file (component tune)
#   hccl-tuned         the daemon, its unit, sysusers.d file and config (a conffile) (component tuned)
#   python3-hccl-tune  the PyTorch backend and its .pth hook (component torch): a package of its own so that a
#                      node daemon or a C++ job does not pull in python3-torch and libtorch
# Depends come from the shared libraries actually linked (dpkg-shlibdeps) plus the packages named below. Meant for a
# build configured with -DCMAKE_INSTALL_PREFIX=/usr (the unit then reads /etc/hccl-tune/hccl-tuned.conf).
set(CPACK_GENERATOR DEB)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL tune tuned)
if(HCCL_TUNE_TORCH)
  list(APPEND CPACK_COMPONENTS_ALL torch)
endif()
set(CPACK_PACKAGE_NAME hccl-tune)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "the hccl-tune authors")
set(CPACK_PACKAGE_CONTACT "hccl-tune developers <hccl-tune-devel@lists.hccl-tune.org>")
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://hccl-tune.org")
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS OFF)

set(CPACK_DEBIAN_TUNE_PACKAGE_NAME hccl-tune)
set(CPACK_DEBIAN_TUNE_PACKAGE_SECTION net)
set(CPACK_COMPONENT_TUNE_DESCRIPTION "collective communication runtime with per-cluster tuning
hccl-tune runs the collectives of distributed training (allreduce, allgather,
reducescatter, broadcast, alltoall, ...) over shared memory and TCP, choosing
the algorithm, chunk size and link of each call from tables measured on the
cluster itself.
.
This package holds the hccl-tune command (sweep, bench, links, show, ...), the
runtime libraries with their headers, a CMake package and a pkg-config file.")

set(CPACK_DEBIAN_TUNED_PACKAGE_NAME hccl-tuned)
set(CPACK_DEBIAN_TUNED_PACKAGE_SECTION net)
# The daemon runs `hccl-tune sweep` for the sweeps it is asked to run; systemd-sysusers creates its user.
set(CPACK_DEBIAN_TUNED_PACKAGE_DEPENDS "hccl-tune (= ${PROJECT_VERSION}), systemd")
set(CPACK_COMPONENT_TUNED_DESCRIPTION "hccl-tune tuning daemon
hccl-tuned keeps the tuned tables of this node in SQLite and serves them to
jobs over gRPC on a unix socket, takes their live timings, re-tunes entries
that regressed and runs sweeps on request.
.
Installing enables the systemd unit without starting it; members of the
hccl-tune group may use its socket.")
configure_file(${PROJECT_SOURCE_DIR}/deploy/debian/hccl-tuned.conffiles.in
               ${PROJECT_BINARY_DIR}/deploy/debian/conffiles @ONLY)
foreach(script postinst prerm postrm)
  configure_file(${PROJECT_SOURCE_DIR}/deploy/debian/hccl-tuned.${script}
                 ${PROJECT_BINARY_DIR}/deploy/debian/${script} COPYONLY)
endforeach()
set(CPACK_DEBIAN_TUNED_PACKAGE_CONTROL_EXTRA
    ${PROJECT_BINARY_DIR}/deploy/debian/conffiles ${PROJECT_BINARY_DIR}/deploy/debian/postinst
    ${PROJECT_BINARY_DIR}/deploy/debian/prerm ${PROJECT_BINARY_DIR}/deploy/debian/postrm)
set(CPACK_DEBIAN_TUNED_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)

set(CPACK_DEBIAN_TORCH_PACKAGE_NAME python3-hccl-tune)
set(CPACK_DEBIAN_TORCH_PACKAGE_SECTION python)
set(CPACK_DEBIAN_TORCH_PACKAGE_DEPENDS "python3 (>= 3.11), python3 (<< 3.12), python3-torch")
set(CPACK_COMPONENT_TORCH_DESCRIPTION "PyTorch backend of hccl-tune (torch.distributed)
Registers the torch.distributed backends hccltune and hccl (a .pth hook, the
first time torch.distributed is imported), so scripts run unchanged with the
backend name changed to hccl.")

# Each package's copyright file and changelog (/usr/share/doc/PACKAGE).
string(TIMESTAMP _changelog_date "%a, %d %b %Y %H:%M:%S +0000" UTC)
foreach(component ${CPACK_COMPONENTS_ALL})
  string(TOUPPER ${component} _upper)
  set(_package ${CPACK_DEBIAN_${_upper}_PACKAGE_NAME})
  set(_doc ${PROJECT_BINARY_DIR}/deploy/debian/${_package})
  file(MAKE_DIRECTORY ${_doc})
  file(WRITE ${_doc}/changelog
       "${_package} (${PROJECT_VERSION}) unstable; urgency=medium\n\n"
       "  * Built from the hccl-tune source tree.\n\n"
       " -- ${CPACK_PACKAGE_CONTACT}  ${_changelog_date}\n")
  execute_process(COMMAND gzip -9n -c INPUT_FILE ${_doc}/changelog OUTPUT_FILE ${_doc}/changelog.gz)
  install(FILES ${PROJECT_SOURCE_DIR}/deploy/debian/copyright ${_doc}/changelog.gz
          DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/${_package} COMPONENT ${component}
          PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
endforeach()

include(CPack)
