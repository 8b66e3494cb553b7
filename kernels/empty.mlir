// A kernel that does nothing: its launch cost is the CUDA driver's floor (kiln-bench).
module {
  func.func @empty() {
    return
  }
}
