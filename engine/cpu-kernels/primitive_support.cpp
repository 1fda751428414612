// The shared helpers of primitive_support.h.
#include "primitive_support.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "mlx/allocator.h"
#include "mlx/ops.h"

namespace afm {

qmm::ScaleType scale_type(mx::Dtype d) {
  if (d == mx::float32) return qmm::ScaleType::F32;
  if (d == mx::float16) return qmm::ScaleType::F16;
  if (d == mx::bfloat16) return qmm::ScaleType::BF16;
  throw std::invalid_argument("[affine_qmm] scales and biases must be float32, float16 or bfloat16");
}

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

mx::Stream cpu_stream(const char* op, mx::StreamOrDevice s) {
  auto stream = mx::to_stream(s);
  if (!(stream.device == mx::Device::cpu))
    throw std::invalid_argument(std::string("[") + op + "] only CPU streams are supported");
  return stream;
}

mx::array as_f32(const mx::array& x, const mx::Stream& stream) {
  return x.dtype() == mx::float32 ? x : mx::astype(x, mx::float32, stream);
}

mx::cpu::CommandEncoder& start_eval(const mx::Stream& stream, const std::vector<mx::array>& inputs,
                                    mx::array& out) {
  out.set_data(mx::allocator::malloc(out.nbytes()));
  auto& encoder = mx::cpu::get_command_encoder(stream);
  for (auto& in : inputs) encoder.set_input_array(in);
  encoder.set_output_array(out);
  return encoder;
}

void check_format(const char* op, int64_t K, const mx::array& w, const mx::array& scales,
                  const mx::array& biases, int group_size, int bits) {
  const std::string at = std::string("[") + op + "] ";
  if (w.dtype() != mx::uint32) throw std::invalid_argument(at + "w must be uint32");
  if (!qmm::supported(bits, group_size, K))
    throw std::invalid_argument(at + "bits must be 4 or 8 and group_size 16, 32, 64 or 128 dividing K");
  if (int64_t(w.shape(-1)) * 32 / bits != K)
    throw std::invalid_argument(at + "w's packed width does not match x's last dimension");
  auto gshape = w.shape();
  gshape.back() = int(K / group_size);
  if (scales.shape() != gshape || biases.shape() != gshape)
    throw std::invalid_argument(at + "scales and biases must be w's shape with K / group_size last");
  if (scales.dtype() != biases.dtype())
    throw std::invalid_argument(at + "scales and biases must share a dtype");
  scale_type(scales.dtype());
}

} // namespace afm
