# Debian packages with CPack (cpack -G DEB in the build directory): one per install component.
#   openrdma      krdmad and its unit and default configuration, rdmactl, it_perf, it_rping, dapl_blk, the provider
#                 modules, the uDAPL provider, manual pages, bash completion
#   libitapi2     libitapi.so.2, the IT-API v2.1 library
#   openrdma-dev  headers (RNIC-PI, <it_api.h>, kernel consumer modules, kDAPL), pkg-config and CMake files, libitapi.so,
#                 the it_hello example
# Packages install where the build was configured to (CMAKE_INSTALL_PREFIX; configure with -DCMAKE_INSTALL_PREFIX=/usr
# for a distribution's layout): the unit, krdmad's default configuration path and the provider directory are built in.
# Their library dependencies come from dpkg-shlibdeps.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME openrdma)
set(CPACK_PACKAGE_VENDOR "OpenRDMA")
set(CPACK_PACKAGE_CONTACT "OpenRDMA maintainers")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_STRIP_FILES ON)  # a RelWithDebInfo build's binaries, without their debug sections
set(CPACK_COMPONENTS_ALL openrdma libitapi2 dev)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# libitapi2 provides its shlibs file; the other packages' use of it is resolved against the staged copy.
set(CPACK_DEBIAN_LIBITAPI2_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CMAKE_BINARY_DIR}/api/itapi)
set(CPACK_DEBIAN_OPENRDMA_PACKAGE_NAME openrdma)
set(CPACK_DEBIAN_OPENRDMA_PACKAGE_DEPENDS "libitapi2 (= ${PROJECT_VERSION})")
set(CPACK_DEBIAN_LIBITAPI2_PACKAGE_NAME libitapi2)
set(CPACK_DEBIAN_LIBITAPI2_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_DEV_PACKAGE_NAME openrdma-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "libitapi2 (= ${PROJECT_VERSION})")
set(CPACK_DEBIAN_OPENRDMA_DESCRIPTION "OpenRDMA: krdmad, rdmactl, RDMA providers and tools
 The kernel access layer daemon (krdmad) and its systemd unit, rdmactl, it_perf, it_rping, the softrnic and hwstub
 providers and the uDAPL provider for the DAT registry.")
set(CPACK_DEBIAN_LIBITAPI2_DESCRIPTION "OpenRDMA: IT-API v2.1 library
 libitapi, The Open Group's Interconnect Transport API over OpenRDMA's user access layer.")
set(CPACK_DEBIAN_DEV_DESCRIPTION "OpenRDMA: development files
 Headers for provider writers (RNIC-PI), IT-API programs and kernel consumer modules, pkg-config and CMake files,
 and a C example.")
# krdmad's configuration is a conffile: dpkg keeps an administrator's edits across upgrades.
set(krdmad_conf "${CMAKE_INSTALL_FULL_SYSCONFDIR}/krdma/krdmad.json")
file(WRITE ${CMAKE_BINARY_DIR}/cpack/openrdma/conffiles "${krdmad_conf}\n")
set(CPACK_DEBIAN_OPENRDMA_PACKAGE_CONTROL_EXTRA ${CMAKE_BINARY_DIR}/cpack/openrdma/conffiles)
include(CPack)
