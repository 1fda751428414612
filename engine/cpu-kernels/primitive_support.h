// What every primitive's file shares (primitive_*.cpp): the stream and
// dtype checks, dense views of strided inputs, the packed-weight format
// checks and the start of an eval. Internal to the kernels' library.
#pragma once

#include <cstdint>
#include <vector>

#include "mlx/array.h"
#include "mlx/backend/cpu/encoder.h"
#include "qmm_affine.h"

namespace afm {

namespace mx = mlx::core;

qmm::ScaleType scale_type(mx::Dtype d);

// A dense row-major copy of an array viewed through arbitrary strides
// (transposes, slices, broadcasts). MLX's own contiguous-copy helper is not
// exported from libmlx, and the data is only valid once earlier tasks on the
// stream have run, so dense() runs inside the dispatched task.
struct View {
  const char* data;
  size_t itemsize;
  bool contiguous;
  mx::Shape shape;
  mx::Strides strides;
};

View view_of(const mx::array& a);
const void* dense(const View& v, std::vector<char>& buf);

// The stream of an op: a CPU one (the kernels have no GPU form), or an
// error naming the op.
mx::Stream cpu_stream(const char* op, mx::StreamOrDevice s);

// x as the kernels read it: f32 (other float types are cast lazily).
mx::array as_f32(const mx::array& x, const mx::Stream& stream);

// How every eval_cpu starts: the output allocated, the arrays registered
// with the stream's encoder (which keeps them alive until the dispatched
// task has run).
mx::cpu::CommandEncoder& start_eval(const mx::Stream& stream, const std::vector<mx::array>& inputs,
                                    mx::array& out);

// The checks shared by the matmul and its gather form: w holds `bits`-bit
// rows of K values (its last axis), scales and biases one value per group of
// each row, same leading axes as w.
void check_format(const char* op, int64_t K, const mx::array& w, const mx::array& scales,
                  const mx::array& biases, int group_size, int bits);

} // namespace afm
