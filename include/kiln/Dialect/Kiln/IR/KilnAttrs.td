//===- KilnAttrs.td - Enums of the kiln dialect ----------------*- tablegen -*-===//
//
// Cache and eviction modifiers, atomic operations, memory semantics and scopes, dot input
// precision. All print as keywords.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_ATTRS
#define KILN_ATTRS

include "mlir/IR/EnumAttr.td"

def Kiln_ProgramDim : I32EnumAttr<"ProgramDim", "grid axis", [
  I32EnumAttrCase<"x", 0>, I32EnumAttrCase<"y", 1>, I32EnumAttrCase<"z", 2>]> {
  let cppNamespace = "::kiln";
}

def Kiln_GridDependencyKind : I32EnumAttr<"GridDependencyKind",
    "programmatic dependent launch control", [
  I32EnumAttrCase<"wait", 0>, I32EnumAttrCase<"launch_dependents", 1>]> {
  let cppNamespace = "::kiln";
}

def Kiln_CacheModifier : I32EnumAttr<"CacheModifier", "PTX cache operator", [
  I32EnumAttrCase<"none", 0>, I32EnumAttrCase<"ca", 1>, I32EnumAttrCase<"cg", 2>,
  I32EnumAttrCase<"cs", 3>, I32EnumAttrCase<"cv", 4>, I32EnumAttrCase<"wb", 5>,
  I32EnumAttrCase<"wt", 6>]> {
  let cppNamespace = "::kiln";
}

def Kiln_EvictionPolicy : I32EnumAttr<"EvictionPolicy", "L2 eviction priority", [
  I32EnumAttrCase<"normal", 0>, I32EnumAttrCase<"evict_first", 1>,
  I32EnumAttrCase<"evict_last", 2>]> {
  let cppNamespace = "::kiln";
}

def Kiln_RMWKind : I32EnumAttr<"RMWKind", "atomic read-modify-write operation", [
  I32EnumAttrCase<"and_", 0, "and">, I32EnumAttrCase<"or_", 1, "or">,
  I32EnumAttrCase<"xor_", 2, "xor">, I32EnumAttrCase<"add", 3>, I32EnumAttrCase<"fadd", 4>,
  I32EnumAttrCase<"max", 5>, I32EnumAttrCase<"min", 6>, I32EnumAttrCase<"umax", 7>,
  I32EnumAttrCase<"umin", 8>, I32EnumAttrCase<"xchg", 9>]> {
  let cppNamespace = "::kiln";
}

def Kiln_MemSemantic : I32EnumAttr<"MemSemantic", "memory ordering of an atomic", [
  I32EnumAttrCase<"relaxed", 0>, I32EnumAttrCase<"acquire", 1>,
  I32EnumAttrCase<"release", 2>, I32EnumAttrCase<"acq_rel", 3>]> {
  let cppNamespace = "::kiln";
}

def Kiln_MemScope : I32EnumAttr<"MemScope", "scope of an atomic", [
  I32EnumAttrCase<"gpu", 0>, I32EnumAttrCase<"cta", 1>, I32EnumAttrCase<"sys", 2>]> {
  let cppNamespace = "::kiln";
}

def Kiln_InputPrecision : I32EnumAttr<"InputPrecision", "precision of fp32 dot inputs", [
  I32EnumAttrCase<"tf32", 0>, I32EnumAttrCase<"tf32x3", 1>, I32EnumAttrCase<"ieee", 2>]> {
  let cppNamespace = "::kiln";
}

#endif // KILN_ATTRS
