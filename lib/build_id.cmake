# Writes OUT: `#define KILN_BUILD_ID "<hash>"`, the SHA-256 (first 16 hex digits) of every
# source the compiler is built from (lib/, include/), so that the JIT's cache keys change
# whenever the compiler does, with or without a new CMake configure. The file is rewritten only
# when the hash changes (only Compile.cpp recompiles). Run with
#   cmake -DROOT=<source dir> -DOUT=<file> -P build_id.cmake
file(GLOB_RECURSE sources LIST_DIRECTORIES false
     "${ROOT}/lib/*.cpp" "${ROOT}/lib/*.h" "${ROOT}/lib/*.map" "${ROOT}/include/*.h"
     "${ROOT}/include/*.td")
list(SORT sources)
set(all "")
foreach(f IN LISTS sources)
  file(SHA256 "${f}" h)
  file(RELATIVE_PATH rel "${ROOT}" "${f}")
  string(APPEND all "${rel}:${h}\n")
endforeach()
string(SHA256 id "${all}")
string(SUBSTRING "${id}" 0 16 id)
set(text "#define KILN_BUILD_ID \"${id}\"\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
  if(old STREQUAL text)
    return()
  endif()
endif()
file(WRITE "${OUT}" "${text}")
