# `cmake --install`: binaries, the runtime libraries with their public headers, a CMake package config
# (find_package(hccltune CONFIG) -> hccltune::runtime) and a pkg-config file (hccltune.pc).
include(CMakePackageConfigHelpers)

set(HCCL_TUNE_INSTALL_LIBS hccltune_common hccltune_policies hccltune_algorithms hccltune_transport hccltune_runtime)
install(TARGETS ${HCCL_TUNE_INSTALL_LIBS} EXPORT hccltuneTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY runtime/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/hccltune/runtime
        FILES_MATCHING PATTERN "*.h")
install(DIRECTORY policies/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/hccltune/policies
        FILES_MATCHING PATTERN "*.h")
install(FILES ${PROJECT_BINARY_DIR}/generated/hccltune/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/hccltune/hccltune)
install(EXPORT hccltuneTargets NAMESPACE hccltune:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/hccltune)
configure_package_config_file(cmake/hccltuneConfig.cmake.in ${PROJECT_BINARY_DIR}/hccltuneConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/hccltune)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/hccltuneConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/hccltuneConfig.cmake ${PROJECT_BINARY_DIR}/hccltuneConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/hccltune)

# The daemon, its systemd unit, config file and system user.
if(TARGET hccl-tuned)
  install(TARGETS hccl-tuned RUNTIME DESTINATION ${CMAKE_INSTALL_SBINDIR})
  install(FILES ${PROJECT_BINARY_DIR}/deploy/hccl-tuned.service DESTINATION lib/systemd/system)
  install(FILES deploy/hccl-tune.sysusers.conf DESTINATION lib/sysusers.d RENAME hccl-tune.conf)
  install(FILES deploy/hccl-tuned.conf DESTINATION ${CMAKE_INSTALL_SYSCONFDIR}/hccl-tune)
endif()

# pkg-config: link order runtime before common (dependents first).
list(REVERSE HCCL_TUNE_INSTALL_LIBS)
set(HCCL_TUNE_PC_LIBS "")
foreach(lib IN LISTS HCCL_TUNE_INSTALL_LIBS)
  string(APPEND HCCL_TUNE_PC_LIBS " -l${lib}")
endforeach()
file(RELATIVE_PATH HCCL_TUNE_PC_PREFIX_REL "${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig" "${CMAKE_INSTALL_PREFIX}")
configure_file(cmake/hccltune.pc.in ${PROJECT_BINARY_DIR}/hccltune.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/hccltune.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
