// Bad command lines and unreadable or unwritable files: a message and exit status 1.
// RUN: not kilnc %s --emit=sass -o /dev/null 2>&1 | FileCheck %s --check-prefix=EMIT
// RUN: not kilnc %s --frobnicate -o /dev/null 2>&1 | FileCheck %s --check-prefix=OPTION
// RUN: not kilnc %s.missing -o /dev/null 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not kilnc %S -o /dev/null 2>&1 | FileCheck %s --check-prefix=DIRECTORY
// RUN: not kilnc %s -o %t.no-such-dir/out.ptx 2>&1 | FileCheck %s --check-prefix=OUTPUT

// EMIT: kilnc: for the --emit option: Cannot find option named 'sass'!
// OPTION: kilnc: Unknown command line argument '--frobnicate'.
// MISSING: kilnc: error: cannot open input file '{{.*}}command-line.mlir.missing': No such file or directory
// DIRECTORY: kilnc: error: cannot open input file '{{.*}}malformed': Is a directory
// OUTPUT: kilnc: error: cannot open output file '{{.*}}.no-such-dir/out.ptx': No such file or directory

func.func @k(%p: !kiln.ptr<f32>, %x: f32) {
  kiln.store %p, %x : !kiln.ptr<f32>
  return
}
