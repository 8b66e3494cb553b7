//===- KilnDialect.td - The kiln tile dialect ------------------*- tablegen -*-===//
//
// The `kiln` dialect is Kiln's layout-free tile IR: one function is one block program, its
// values are scalars, `!kiln.ptr<T>` pointers and ranked tensors ("tiles") of those.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT
#define KILN_DIALECT

include "mlir/IR/OpBase.td"

def Kiln_Dialect : Dialect {
  let name = "kiln";
  let cppNamespace = "::kiln";
  let summary = "Kiln's block-program tile IR";
  let description = [{
    A kernel is a block program: one instance runs per point of the launch grid and works on
    whole tiles. Tiles are builtin ranked tensors of scalars or `!kiln.ptr<T>`; they carry no
    layout here. Elementwise arithmetic and math come from the upstream `arith` and `math`
    dialects, control flow from `scf`; this dialect adds what those lack: program ids, ranges,
    shape manipulation, pointer arithmetic, masked memory access, atomics, dot, reductions and
    scans, printing and assertions.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::math::MathDialect",
                           "::mlir::scf::SCFDialect", "::mlir::func::FuncDialect"];
  let useDefaultTypePrinterParser = 1;
  let hasConstantMaterializer = 1;
}

class Kiln_Op<string mnemonic, list<Trait> traits = []>
    : Op<Kiln_Dialect, mnemonic, traits>;

#endif // KILN_DIALECT
