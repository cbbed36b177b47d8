#include "base/cpu_features.h"

#include <cpuid.h>

#include <cstdlib>

namespace rw {
namespace {

bool EnvSet(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && v[0] != '\0' && !(v[0] == '0' && v[1] == '\0');
}

struct Features {
  bool no_avx2 = false, no_avx512 = false;  // the environment switches
  bool cpu_avx2_fma = false, cpu_f16c = false, cpu_avx512 = false;  // what the CPU has
  bool f16c = false, avx2_fma = false, avx512 = false;              // what the kernels may use
};

const Features& Probe() {
  static const Features f = [] {
    __builtin_cpu_init();
    Features r;
    r.no_avx2 = EnvSet("REWIND_NO_AVX2");
    r.no_avx512 = EnvSet("REWIND_NO_AVX512");
    r.cpu_avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    // F16C from CPUID leaf 1 (clang before 15 does not know the "f16c" string of __builtin_cpu_supports).
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    const bool f16c_bit = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
    r.cpu_f16c = __builtin_cpu_supports("avx") && f16c_bit;
    r.cpu_avx512 = r.cpu_avx2_fma && r.cpu_f16c && __builtin_cpu_supports("avx512f") &&
                   __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
                   __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vnni");
    r.f16c = r.cpu_f16c && !r.no_avx2;
    r.avx2_fma = r.cpu_avx2_fma && !r.no_avx2;
    r.avx512 = r.cpu_avx512 && !r.no_avx2 && !r.no_avx512;
    return r;
  }();
  return f;
}

}  // namespace

bool CpuHasF16c() { return Probe().f16c; }
bool CpuHasAvx2Fma() { return Probe().avx2_fma; }
bool CpuHasAvx2FmaF16c() { return Probe().avx2_fma && Probe().f16c; }
bool CpuHasAvx512() { return Probe().avx512; }

std::string CpuAvx2OffReason() {
  const Features& f = Probe();
  if (f.no_avx2) return "REWIND_NO_AVX2 is set";
  if (!f.cpu_avx2_fma || !f.cpu_f16c) return "the CPU has no AVX2/FMA/F16C";
  return "";
}

std::string CpuAvx512OffReason() {
  const Features& f = Probe();
  if (std::string r = CpuAvx2OffReason(); !r.empty()) return r;
  if (f.no_avx512) return "REWIND_NO_AVX512 is set";
  if (!f.cpu_avx512) return "the CPU has no AVX-512 F/DQ/VL/BW/VNNI";
  return "";
}

const char* CpuLevelName() { return CpuHasAvx512() ? "avx512" : CpuHasAvx2FmaF16c() ? "avx2" : "scalar"; }

}  // namespace rw
