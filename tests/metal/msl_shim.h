// Just enough of the Metal Shading Language environment for g++ to compile the
// kernel bodies of cactus_metal.kernels: address-space qualifiers dropped,
// half as _Float16, the SIMD-group and barrier builtins provided.
//
// Without MSL_EMULATE it serves a syntax and type check.  With MSL_EMULATE the
// builtins really synchronise the std::threads that msl_emulator.py runs for
// one threadgroup at a time, so kernels can execute on the CPU.  Neither says
// anything about MSL-only rules or the Apple GPU compiler.
#include <algorithm>
#include <cmath>
#include <cstdint>
#ifdef MSL_EMULATE  // every system header before the macros below
#include <barrier>
#include <memory>
#include <thread>
#include <vector>
#endif

#define device
#define constant
typedef unsigned int uint;
typedef _Float16 half;
using std::uint8_t;
struct uint3 { uint x, y, z; };

namespace metal {
inline float abs(float x) { return std::fabs(x); }
inline float max(float a, float b) { return std::max(a, b); }
inline float min(float a, float b) { return std::min(a, b); }
inline int max(int a, int b) { return std::max(a, b); }
inline int min(int a, int b) { return std::min(a, b); }
namespace precise {
inline float exp(float x) { return std::exp(x); }
inline float tanh(float x) { return std::tanh(x); }
inline float sqrt(float x) { return std::sqrt(x); }
}  // namespace precise
enum class mem_flags { mem_none, mem_device, mem_threadgroup };
}  // namespace metal

#ifdef MSL_EMULATE
// threadgroup memory: one copy, shared by the threads of the single threadgroup
// that runs at a time.
#define threadgroup static
struct EmuThread {
  std::barrier<>* simd_bar;  // the thread's SIMD-group
  float* simd_slots;
  int lane, simd_width;
  std::barrier<>* group_bar;  // the whole threadgroup
};
inline thread_local EmuThread emu;
namespace metal {
inline float simd_sum(float x) {
  emu.simd_slots[emu.lane] = x;
  emu.simd_bar->arrive_and_wait();
  float s = 0.0f;
  for (int i = 0; i < emu.simd_width; ++i) s += emu.simd_slots[i];
  emu.simd_bar->arrive_and_wait();  // nobody overwrites a slot before all have read
  return s;
}
inline void threadgroup_barrier(mem_flags) { emu.group_bar->arrive_and_wait(); }
}  // namespace metal
#else
#define threadgroup
namespace metal {
inline void threadgroup_barrier(mem_flags) {}
inline float simd_sum(float x) { return x; }
}  // namespace metal
#endif
using namespace metal;  // MLX's generated kernels open the metal namespace too
