//===- kiln-opt.cpp - Kiln's opt tool for lit tests -----------------------===//
//
// This file implements kiln-opt: mlir-opt with the kiln and kiln_gpu dialects, Kiln's passes,
// the `kiln-gpu-pipeline` and the upstream passes the pipeline uses.
//
//===----------------------------------------------------------------------===//

#include "kiln/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  kiln::registerKilnDialects(registry);
  kiln::registerKilnPassesAndPipelines();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerSCFToControlFlowPass();
  mlir::registerReconcileUnrealizedCastsPass();
  return mlir::asMainReturnCode(mlir::MlirOptMain(argc, argv, "Kiln optimizer driver\n", registry));
}
