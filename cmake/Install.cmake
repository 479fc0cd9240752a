# `cmake --install`: binaries, the runtime libraries with their public headers, a CMake package config
# (find_package(hccltune CONFIG) -> hccltune::runtime) and a pkg-config file (hccltune.pc).
include(CMakePackageConfigHelpers)

set(HCCL_TUNE_INSTALL_LIBS hccltune_common hccltune_policies hccltune_algorithms hccltune_selector hccltune_transport
  hccltune_runtime hccltune_links)
# Components (one Debian package each, cmake/Packaging.cmake): `tune` = the CLI, the runtime libraries, headers and
# the CMake and pkg-config files; `tuned` = the daemon with its unit, system user and config; `torch` = the PyTorch
# backend (python/CMakeLists.txt).
install(TARGETS ${HCCL_TUNE_INSTALL_LIBS} EXPORT hccltuneTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT tune
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT tune)
install(DIRECTORY runtime/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/hccltune/runtime COMPONENT tune
        FILES_MATCHING PATTERN "*.h")
install(DIRECTORY links/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/hccltune/links COMPONENT tune
        FILES_MATCHING PATTERN "*.h")
install(DIRECTORY policies/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/hccltune/policies COMPONENT tune
        FILES_MATCHING PATTERN "*.h")
install(FILES ${PROJECT_BINARY_DIR}/generated/hccltune/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/hccltune/hccltune COMPONENT tune)
install(EXPORT hccltuneTargets NAMESPACE hccltune:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/hccltune COMPONENT tune)
configure_package_config_file(cmake/hccltuneConfig.cmake.in ${PROJECT_BINARY_DIR}/hccltuneConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/hccltune)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/hccltuneConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/hccltuneConfig.cmake ${PROJECT_BINARY_DIR}/hccltuneConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/hccltune COMPONENT tune)

# The daemon, its systemd unit, config file and system user. Units go under the prefix (systemd also reads
# /usr/local/lib/systemd/system), except for the prefix /usr, whose units Debian 12 keeps in /lib/systemd/system.
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(_unit_dir_default /lib/systemd/system)
else()
  set(_unit_dir_default lib/systemd/system)
endif()
set(HCCL_TUNE_SYSTEMD_UNIT_DIR "${_unit_dir_default}" CACHE STRING
    "Where `cmake --install` puts hccl-tuned.service (relative to the prefix, or absolute)")
if(TARGET hccl-tuned)
  install(TARGETS hccl-tuned RUNTIME DESTINATION ${CMAKE_INSTALL_SBINDIR} COMPONENT tuned)
  install(FILES ${PROJECT_BINARY_DIR}/deploy/hccl-tuned.service DESTINATION ${HCCL_TUNE_SYSTEMD_UNIT_DIR}
          COMPONENT tuned)
  install(FILES deploy/hccl-tune.sysusers.conf DESTINATION lib/sysusers.d RENAME hccl-tune.conf COMPONENT tuned)
  # Absolute: for the prefix /usr the sysconfdir is /etc, not /usr/etc (the unit names the same path).
  install(FILES deploy/hccl-tuned.conf DESTINATION ${CMAKE_INSTALL_FULL_SYSCONFDIR}/hccl-tune COMPONENT tuned)
endif()

# pkg-config: link order runtime before common (dependents first).
list(REVERSE HCCL_TUNE_INSTALL_LIBS)
set(HCCL_TUNE_PC_LIBS "")
foreach(lib IN LISTS HCCL_TUNE_INSTALL_LIBS)
  string(APPEND HCCL_TUNE_PC_LIBS " -l${lib}")
endforeach()
set(HCCL_TUNE_PC_REQUIRES_OPTIONAL "")
if(HCCL_TUNE_HAVE_UCX)
  string(APPEND HCCL_TUNE_PC_REQUIRES_OPTIONAL " ucx")
endif()
if(HCCL_TUNE_HAVE_PMIX)
  string(APPEND HCCL_TUNE_PC_REQUIRES_OPTIONAL " pmix")
endif()
file(RELATIVE_PATH HCCL_TUNE_PC_PREFIX_REL "${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig" "${CMAKE_INSTALL_PREFIX}")
configure_file(cmake/hccltune.pc.in ${PROJECT_BINARY_DIR}/hccltune.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/hccltune.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT tune)

include(cmake/Packaging.cmake)
