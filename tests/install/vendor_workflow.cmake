# Script mode (cmake -P): install, then build and check a provider against the installed files only.
include(${CMAKE_CURRENT_LIST_DIR}/run.cmake)

set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})

foreach(f
    include/rnicpi/rnicpi.h include/rnicpi/ri_verbs.h include/rnicpi/cpp/provider.hpp include/rnicpi/cpp/status.hpp
    bin/rdmactl sbin/krdmad lib/systemd/system/krdmad.service etc/krdma/krdmad.json share/man/man8/krdmad.8
    share/man/man5/krdmad.json.5 share/man/man7/openrdma.7 share/bash-completion/completions/rdmactl
    include/it_api.h include/krdma/consumer_module.h share/doc/OpenRDMA/examples/it_hello.c
    ${LIBDIR}/pkgconfig/openrdma.pc ${LIBDIR}/pkgconfig/itapi.pc ${LIBDIR}/pkgconfig/kdapl.pc
    include/openrdma/dat2/kdat.h ${LIBDIR}/cmake/OpenRDMA/OpenRDMAConfig.cmake
    ${LIBDIR}/cmake/OpenRDMA/OpenRDMAConfigVersion.cmake ${LIBDIR}/cmake/OpenRDMA/OpenRDMATargets.cmake)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "install is missing ${f}")
  endif()
endforeach()
if(NOT IS_DIRECTORY ${prefix}/${PROVIDER_SUBDIR})
  message(FATAL_ERROR "install is missing the provider directory ${PROVIDER_SUBDIR}")
endif()
# Internal host headers and test modules must not leak into the install.
file(GLOB_RECURSE leaked ${prefix}/include/rnicpi/host/* ${prefix}/*test_*.so)
if(leaked)
  message(FATAL_ERROR "install contains internal files: ${leaked}")
endif()

# A vendor's CMake build against the installed package (a provider module with OpenRDMA::rnicpi, and the installed
# it_hello example with OpenRDMA::itapi).
run(${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${WORK_DIR}/consumer -G ${GENERATOR}
    -DCMAKE_PREFIX_PATH=${prefix} -DMODULE_SOURCE=${MODULE_SOURCE}
    -DHELLO_SOURCE=${prefix}/share/doc/OpenRDMA/examples/it_hello.c
    -DKDAPL_SOURCE=${SOURCE_DIR}/tools/dapl_blk/blk_service.c -DKDAPL_INCLUDE=${SOURCE_DIR}/tools/dapl_blk)
run(${CMAKE_COMMAND} --build ${WORK_DIR}/consumer)
run(${CMAKE_COMMAND} --install ${WORK_DIR}/consumer)
set(providers ${prefix}/${PROVIDER_SUBDIR})
if(NOT EXISTS ${providers}/vendor_kvp.so)
  message(FATAL_ERROR "the consumer project did not install vendor_kvp.so into OPENRDMA_PROVIDER_DIR")
endif()

# A C compile with flags from the relocatable pkg-config file.
set(ENV{PKG_CONFIG_PATH} ${prefix}/${LIBDIR}/pkgconfig)
run(pkg-config --cflags openrdma)
string(STRIP "${LAST_OUTPUT}" cflags)
run(pkg-config --variable=providerdir openrdma)
string(STRIP "${LAST_OUTPUT}" pc_providers)
file(REAL_PATH "${pc_providers}" pc_providers)
file(REAL_PATH "${providers}" real_providers)
if(NOT pc_providers STREQUAL real_providers)
  message(FATAL_ERROR "pkg-config providerdir is ${pc_providers}, expected ${real_providers}")
endif()
separate_arguments(cflags UNIX_COMMAND "${cflags}")
run(cc -std=c99 -Wall -Wextra -Werror ${cflags} -c ${C_SOURCE} -o ${WORK_DIR}/c_consumer.o)
run(pkg-config --variable=rnicpi_abi_version openrdma)
if(NOT LAST_OUTPUT MATCHES "^[1-9][0-9]*\\.[0-9]+")
  message(FATAL_ERROR "openrdma.pc says RNIC-PI ABI ${LAST_OUTPUT}")
endif()

# The installed example, built the way its comment says (pkg-config itapi), and run: without arguments it prints
# its usage (exit 2), which it can only do once the installed libitapi has loaded.
run(pkg-config --cflags --libs itapi)
string(STRIP "${LAST_OUTPUT}" itapi_flags)
separate_arguments(itapi_flags UNIX_COMMAND "${itapi_flags}")
run(cc -std=c11 -Wall -Wextra -Werror -o ${WORK_DIR}/it_hello ${prefix}/share/doc/OpenRDMA/examples/it_hello.c
    ${itapi_flags})
set(ENV{LD_LIBRARY_PATH} ${prefix}/${LIBDIR})
execute_process(COMMAND ${WORK_DIR}/it_hello RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 2 OR NOT err MATCHES "usage: it_hello")
  message(FATAL_ERROR "the installed example built with pkg-config itapi did not run (${rc}): ${err}")
endif()
# Kernel consumer modules against the installed headers: the kernel IT-API example (<it_api.h>,
# <krdma/consumer_module.h>) and the kDAPL block service (kdapl.pc); both link nothing.
run(pkg-config --cflags itapi)
string(STRIP "${LAST_OUTPUT}" itapi_cflags)
separate_arguments(itapi_cflags UNIX_COMMAND "${itapi_cflags}")
run(cc -std=gnu11 -Wall -Wextra -Werror -shared -fPIC ${itapi_cflags} -o ${WORK_DIR}/kernel_echo.so
    ${SOURCE_DIR}/tools/examples/kernel_echo.c)
run(pkg-config --cflags kdapl)
string(STRIP "${LAST_OUTPUT}" kdapl_cflags)
separate_arguments(kdapl_cflags UNIX_COMMAND "${kdapl_cflags}")
run(cc -std=gnu11 -Wall -Wextra -shared -fPIC ${kdapl_cflags} -I${SOURCE_DIR}/tools/dapl_blk
    -o ${WORK_DIR}/blk_service.so ${SOURCE_DIR}/tools/dapl_blk/blk_service.c)
execute_process(COMMAND ${WORK_DIR}/consumer/it_hello_consumer RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 2 OR NOT err MATCHES "usage: it_hello")
  message(FATAL_ERROR "the installed example built with OpenRDMA::itapi did not run (${rc}): ${err}")
endif()

# The installed rdmactl accepts the vendor's module (its uVP file is not shipped here, which modinfo reports).
run(${prefix}/bin/rdmactl modinfo --provider-dir ${providers} vendor_kvp.so)
if(NOT LAST_OUTPUT MATCHES "name: +cppkvp")
  message(FATAL_ERROR "rdmactl did not accept the vendor module:\n${LAST_OUTPUT}")
endif()
# The installed conformance runner against an installed provider and the installed krdmad, as a vendor runs it.
if(EXISTS ${prefix}/bin/openrdma-conformance)
  run(${prefix}/bin/openrdma-conformance --provider hwstub --provider-dir ${providers} --krdmad ${prefix}/sbin/krdmad
      --gtest_filter=Verbs.RnicIsListedAndOpensByNameAndByAddress:Datapath.SendsOfEverySize*)
  if(NOT LAST_OUTPUT MATCHES "PASSED  \\] 2 tests")
    message(FATAL_ERROR "the installed openrdma-conformance did not pass:\n${LAST_OUTPUT}")
  endif()
endif()
file(REMOVE_RECURSE ${WORK_DIR})
message(STATUS "vendor workflow against the installed tree: ok")
