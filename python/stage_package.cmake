# Stages the kiln package's .py files next to the extension: copies SRC over DST and removes
# staged .py files whose source is gone (a renamed or split module must not linger in
# build/python and shadow or stand in for its replacement). Run with
#   cmake -DSRC=<python/kiln> -DDST=<build/python/kiln> -P stage_package.cmake
file(GLOB_RECURSE staged RELATIVE "${DST}" "${DST}/*.py")
foreach(f IN LISTS staged)
  if(NOT EXISTS "${SRC}/${f}")
    file(REMOVE "${DST}/${f}")
  endif()
endforeach()
file(COPY "${SRC}/" DESTINATION "${DST}")
