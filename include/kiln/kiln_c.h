/*===- kiln_c.h - Kiln's exported C API ---------------------------*- C -*-===*\
|*                                                                            *|
|* The stable C ABI of libkiln.so: compile a kiln-dialect kernel to PTX.      *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef KILN_KILN_C_H
#define KILN_KILN_C_H

#define KILN_EXPORT __attribute__((visibility("default")))

#ifdef __cplusplus
extern "C" {
#endif

/** Kiln's version string. */
KILN_EXPORT const char *kiln_version(void);
/** Compiles `source` (kiln dialect) for `arch` ("sm_90") with `num_warps`; on success returns
 *  0 and sets *ptx, else returns 1 and sets *error. Free both with kiln_free. */
KILN_EXPORT int kiln_compile_mlir(const char *source, const char *arch, int num_warps, char **ptx,
                                  char **error);
/** Frees a string returned by Kiln. */
KILN_EXPORT void kiln_free(char *p);

#ifdef __cplusplus
}
#endif

#endif /* KILN_KILN_C_H */
