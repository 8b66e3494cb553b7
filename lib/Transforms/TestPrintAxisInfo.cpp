//===- TestPrintAxisInfo.cpp - Print the axis analysis (for lit) ----------===//
//
// This file implements -kiln-test-print-axis-info, which prints the axis analysis of every
// integer and pointer result as a remark so lit tests can check the rules.
//
//===----------------------------------------------------------------------===//

#include "kiln/Analysis/AxisInfo.h"
#include "kiln/Passes.h"

#define DEBUG_TYPE "kiln-test-print-axis-info"

namespace kiln {
#define GEN_PASS_DEF_KILNTESTPRINTAXISINFO
#include "kiln/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {
struct KilnTestPrintAxisInfoPass final
    : kiln::impl::KilnTestPrintAxisInfoBase<KilnTestPrintAxisInfoPass> {
  void runOnOperation() override {
    kiln::AxisInfoAnalysis analysis(getOperation());
    auto print = [](InFlightDiagnostic &diag, StringRef name, ArrayRef<int64_t> v) {
      diag << name << " = [";
      llvm::interleaveComma(v, diag);
      diag << "]";
    };
    getOperation()->walk([&](Operation *op) {
      if (op->getNumResults() != 1 ||
          !isa<IntegerType, kiln::PointerType>(getElementTypeOrSelf(op->getResult(0))))
        return;
      const kiln::AxisInfo &info = analysis.get(op->getResult(0));
      InFlightDiagnostic diag = op->emitRemark();
      print(diag, "contiguity", info.contiguity);
      print(diag, ", divisibility", info.divisibility);
      print(diag, ", constancy", info.constancy);
    });
  }
};
} // namespace
