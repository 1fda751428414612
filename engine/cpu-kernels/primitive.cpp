#include "primitive.h"

#include <cstdarg>
#include <cstring>
#include <stdexcept>
#include <string>

#include "mlx/allocator.h"
#include "mlx/backend/cpu/encoder.h"
#include "mlx/ops.h"
#include "mlx/version.h"
#include "qmm_affine.h"

namespace afm {
namespace {

qmm::ScaleType scale_type(mx::Dtype d) {
  if (d == mx::float32) return qmm::ScaleType::F32;
  if (d == mx::float16) return qmm::ScaleType::F16;
  if (d == mx::bfloat16) return qmm::ScaleType::BF16;
  throw std::invalid_argument("[affine_qmm] scales and biases must be float32, float16 or bfloat16");
}

// A dense row-major copy of an array viewed through arbitrary strides
// (transposes, slices, broadcasts). MLX's own contiguous-copy helper is not
// exported from libmlx, and the data is only valid once earlier tasks on the
// stream have run, so this runs inside the dispatched task.
struct View {
  const char* data;
  size_t itemsize;
  bool contiguous;
  mx::Shape shape;
  mx::Strides strides;
};

View view_of(const mx::array& a) {
  return View{
      a.data<char>(),
      a.itemsize(),
      static_cast<bool>(a.flags().row_contiguous),
      a.shape(),
      a.strides()};
}

const void* dense(const View& v, std::vector<char>& buf) {
  if (v.contiguous) return v.data;
  size_t total = 1;
  for (auto d : v.shape) total *= size_t(d);
  buf.resize(total * v.itemsize);
  const int nd = int(v.shape.size());
  std::vector<int64_t> idx(nd, 0);
  char* out = buf.data();
  for (size_t e = 0; e < total; ++e) {
    int64_t off = 0;
    for (int d = 0; d < nd; ++d) off += idx[d] * v.strides[d];
    std::memcpy(out + e * v.itemsize, v.data + off * int64_t(v.itemsize), v.itemsize);
    for (int d = nd - 1; d >= 0; --d) {
      if (++idx[d] < v.shape[d]) break;
      idx[d] = 0;
    }
  }
  return buf.data();
}

} // namespace

mx::array affine_qmm(
    const mx::array& x_in,
    const mx::array& w,
    const mx::array& scales,
    const mx::array& biases,
    int group_size,
    int bits,
    int blas_min_rows,
    mx::StreamOrDevice s) {
  auto stream = mx::to_stream(s);
  if (!(stream.device == mx::Device::cpu))
    throw std::invalid_argument("[affine_qmm] only CPU streams are supported");
  if (x_in.ndim() < 1) throw std::invalid_argument("[affine_qmm] x must have at least one dimension");
  if (w.dtype() != mx::uint32 || w.ndim() != 2)
    throw std::invalid_argument("[affine_qmm] w must be a 2-D uint32 array");
  const int64_t K = x_in.shape(-1);
  const int64_t N = w.shape(0);
  if (!qmm::supported(bits, group_size, K))
    throw std::invalid_argument(
        "[affine_qmm] bits must be 4 or 8 and group_size 32, 64 or 128 dividing K");
  if (int64_t(w.shape(1)) * 32 / bits != K)
    throw std::invalid_argument("[affine_qmm] w's packed width does not match x's last dimension");
  const mx::Shape gshape{int(N), int(K / group_size)};
  if (scales.shape() != gshape || biases.shape() != gshape)
    throw std::invalid_argument("[affine_qmm] scales and biases must be [N, K / group_size]");
  if (scales.dtype() != biases.dtype())
    throw std::invalid_argument("[affine_qmm] scales and biases must share a dtype");
  scale_type(scales.dtype());

  auto x = x_in.dtype() == mx::float32 ? x_in : mx::astype(x_in, mx::float32, stream);
  auto out_shape = x.shape();
  out_shape.back() = int(N);
  return mx::array(
      std::move(out_shape),
      mx::float32,
      std::make_shared<AffineQmm>(stream, group_size, bits, blas_min_rows),
      {x, w, scales, biases});
}

void AffineQmm::eval_cpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) {
  auto& out = outputs[0];
  out.set_data(mx::allocator::malloc(out.nbytes()));

  auto& encoder = mx::cpu::get_command_encoder(stream());
  for (auto& in : inputs) encoder.set_input_array(in);
  encoder.set_output_array(out);

  const int64_t K = inputs[0].shape(-1);
  const int64_t M = K ? int64_t(inputs[0].size()) / K : 0;
  qmm::AffineMatrix mat{};
  mat.scale_type = scale_type(inputs[2].dtype());
  mat.n = inputs[1].shape(0);
  mat.k = K;
  mat.bits = bits_;
  mat.group_size = group_size_;

  // Pointers and strides are fixed now; the contents are written by earlier
  // tasks on this stream, so everything that reads them runs in the task.
  // MLX's eval keeps the input buffers alive until the task has run.
  encoder.dispatch([x = view_of(inputs[0]),
                    w = view_of(inputs[1]),
                    sc = view_of(inputs[2]),
                    bi = view_of(inputs[3]),
                    y = out.data<float>(),
                    mat,
                    M,
                    blas = blas_min_rows_ > 0 && M >= blas_min_rows_ && qmm::sgemm_available()]() mutable {
    std::vector<char> xb, wb, sb, bb;
    mat.w = static_cast<const uint32_t*>(dense(w, wb));
    mat.scales = dense(sc, sb);
    mat.biases = dense(bi, bb);
    const float* xd = static_cast<const float*>(dense(x, xb));
    if (blas) qmm::matmul_dequant_sgemm(xd, M, mat, y);
    else qmm::matmul(xd, M, mat, y);
  });
}

void AffineQmm::eval_gpu(const std::vector<mx::array>&, std::vector<mx::array>&) {
  throw std::runtime_error("[AffineQmm] has no GPU implementation; use mx::quantized_matmul on Metal");
}

std::vector<mx::Shape> AffineQmm::output_shapes(const std::vector<mx::array>& inputs) {
  auto shape = inputs[0].shape();
  shape.back() = inputs[1].shape(0);
  return {shape};
}

bool AffineQmm::is_equivalent(const mx::Primitive& other) const {
  auto* o = dynamic_cast<const AffineQmm*>(&other);
  return o && o->group_size_ == group_size_ && o->bits_ == bits_ &&
      o->blas_min_rows_ == blas_min_rows_;
}

} // namespace afm

// ---------------------------------------------------------------------------
// C entry points

// mlx-c's error reporter, when mlx-c is linked into the same process (as in
// the engine); weak so this library also links without it (tests, bench).
extern "C" void _mlx_error(const char* file, const int line, const char* fmt, ...)
    __attribute__((weak));

namespace {

namespace mx = mlx::core;

thread_local std::string g_last_error;

int fail(const char* msg) {
  g_last_error = msg;
  if (_mlx_error) _mlx_error(__FILE__, __LINE__, "%s", msg);
  return 1;
}

mx::array& get(afm_mlx_array a) {
  if (!a.ctx) throw std::invalid_argument("[afm_affine_qmm] empty array handle");
  return *static_cast<mx::array*>(a.ctx);
}

} // namespace

extern "C" int afm_affine_qmm(
    afm_mlx_array* res,
    afm_mlx_array x,
    afm_mlx_array w,
    afm_mlx_array scales,
    afm_mlx_array biases,
    int group_size,
    int bits,
    int blas_min_rows,
    afm_mlx_stream s) {
  try {
    if (!res) throw std::invalid_argument("[afm_affine_qmm] res is NULL");
    mx::StreamOrDevice sd = mx::Device(mx::Device::cpu);
    if (s.ctx) sd = *static_cast<mx::Stream*>(s.ctx);
    auto y = afm::affine_qmm(get(x), get(w), get(scales), get(biases), group_size, bits, blas_min_rows, sd);
    if (res->ctx) *static_cast<mx::array*>(res->ctx) = std::move(y);
    else res->ctx = new mx::array(std::move(y));
    g_last_error.clear();
    return 0;
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}

extern "C" const char* afm_qmm_last_error(void) {
  return g_last_error.c_str();
}

extern "C" int afm_qmm_set_threads(int n) {
  if (n > 0) afm::qmm::set_num_threads(n);
  return afm::qmm::num_threads();
}

extern "C" int afm_qmm_uses_avx2(void) {
  return afm::qmm::resolve_path(afm::qmm::Path::Auto) == afm::qmm::Path::Avx2 ? 1 : 0;
}

#define AFM_STR_(x) #x
#define AFM_STR(x) AFM_STR_(x)

extern "C" const char* afm_qmm_mlx_version_built(void) {
  return AFM_STR(MLX_VERSION_MAJOR) "." AFM_STR(MLX_VERSION_MINOR) "." AFM_STR(MLX_VERSION_PATCH);
}

extern "C" const char* afm_qmm_mlx_version_loaded(void) {
  return mx::version();
}
