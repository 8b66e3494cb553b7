# lit configuration for Kiln: kiln-opt / kilnc + FileCheck tests over .mlir files, and Python
# checks of the built tools (malformed input, ldd, ptxas).
import os
import shutil

import lit.formats

config.name = "Kiln"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "unit", "python"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.kiln_obj_root, "test")

tools = os.path.join(config.kiln_obj_root, "tools")
config.environment["PATH"] = os.pathsep.join(
    [tools, config.llvm_tools_dir, config.environment.get("PATH", os.environ.get("PATH", ""))])
config.substitutions.append(("%kiln_lib", os.path.join(config.kiln_obj_root, "lib")))
config.substitutions.append(("%kernels", os.path.join(config.kiln_src_root, "kernels")))
config.substitutions.append(("%python", config.python_executable))

ptxas = shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas"
if os.path.exists(ptxas):
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", ptxas))

if str(getattr(config, "kiln_static_llvm", "")).upper() in ("ON", "1", "TRUE", "YES"):
    config.available_features.add("static-llvm")
