//! ggml quantized blocks repacked, without loss, into MLX's affine form
//! (`w = scale · q + bias` per group of 32, `q` packed little-endian into
//! u32 words), the form the engine multiplies packed (afm's CPU primitive,
//! MLX's `quantized_matmul` on Metal).
//!
//! MLX's own GGUF reader does this for Q4_0, Q4_1 and Q8_0 but refuses a
//! whole file that holds any other block type, and llama.cpp's `Q4_K_M`
//! files mix Q4_K/Q5_0/Q8_0/Q6_K (Gemma 3 270M: 640 columns are not a
//! multiple of 256, so most of its matrices fall back to Q5_0). Every block
//! type whose groups of 32 share one scale and one offset maps exactly:
//!
//! | ggml | value | affine |
//! |---|---|---|
//! | Q4_0 | `d·(q−8)` | 4-bit, `d`, `−8d` |
//! | Q4_1 | `d·q + m` | 4-bit, `d`, `m` |
//! | Q8_0 | `d·q`, q signed | 8-bit of `q+128`, `d`, `−128d` |
//! | Q5_0 | `d·(q−16)` | 8-bit, `d`, `−16d` |
//! | Q5_1 | `d·q + m` | 8-bit, `d`, `m` |
//! | Q4_K | `d·sc_j·q − dmin·m_j` | 4-bit, `d·sc_j`, `−dmin·m_j` |
//! | Q5_K | the same, 5-bit `q` | 8-bit |
//!
//! | Q6_K | `d·sc_j·(q−32)`, groups of 16 | 8-bit, `d·sc_j`, `−32·d·sc_j`, groups of 16 |
//!
//! Scales and biases are f16 where the block's are (`−8d`, `−16d`, `−128d`
//! are exact in f16), f32 for the K-quants (`d·sc_j` is an f16 times a
//! 6- or 8-bit integer: exact in f32, not always in f16). 5- and 6-bit
//! values take 8 bits here (the primitive runs 4 and 8): 1.45x (1.2x) the
//! bytes of the file, still a quarter of f32. Q6_K's groups of 16 are
//! afm's CPU primitive's alone (MLX's quantized ops take 32 and up; its
//! `dequantize` takes 16): the reader repacks it only where that primitive
//! runs. Q2_K/Q3_K have no such form and are dequantized to f32 by candle.

use candle_core::quantized::GgmlDType;
use half::f16;

/// One matrix in MLX affine form, row-major: `rows` rows of `cols` values.
pub struct Affine {
    pub bits: i32,
    /// Values per scale and bias along a row.
    pub group: usize,
    /// `[rows, cols * bits / 32]`.
    pub packed: Vec<u32>,
    /// `[rows, cols / group]` each.
    pub scales: Vec<f32>,
    pub biases: Vec<f32>,
    /// Every scale and bias is an f16 value (all but the K-quants), so
    /// they can be stored in half the bytes without loss.
    pub half_exact: bool,
}

/// The group of every block type but Q6_K (and of MLX's GGUF reader).
pub const GROUP: usize = 32;

/// The affine form of `raw` (the tensor's ggml blocks, rows of `cols`
/// values one after the other), or `None` for a block type without one.
pub fn repack(dtype: GgmlDType, raw: &[u8], cols: usize) -> Option<Affine> {
    let (block_bytes, block_values, bits, group) = layout(dtype)?;
    if !cols.is_multiple_of(block_values) || !raw.len().is_multiple_of(block_bytes) {
        return None;
    }
    let values = raw.len() / block_bytes * block_values;
    let groups = values / group;
    let mut out = Affine {
        bits,
        group,
        packed: Vec::with_capacity(values * bits as usize / 32),
        scales: Vec::with_capacity(groups),
        biases: Vec::with_capacity(groups),
        half_exact: !matches!(dtype, GgmlDType::Q4K | GgmlDType::Q5K | GgmlDType::Q6K),
    };
    // Values of one block in order; `pack` packs them 32 at a time.
    let mut q = [0u8; 256];
    for block in raw.chunks_exact(block_bytes) {
        let n = decode(dtype, block, &mut q[..block_values], &mut out);
        debug_assert_eq!(n, block_values / group);
        for chunk in q[..block_values].chunks_exact(32) {
            pack(chunk, bits, &mut out.packed);
        }
    }
    Some(out)
}

/// Whether rows of `cols` values of `dtype` have an affine form.
pub fn supports(dtype: GgmlDType, cols: usize) -> bool {
    layout(dtype).is_some_and(|(_, per_block, _, _)| cols.is_multiple_of(per_block))
}

/// The (bits, group size) `dtype` repacks to, if it has an affine form.
pub fn format(dtype: GgmlDType) -> Option<(i32, usize)> {
    layout(dtype).map(|(_, _, bits, group)| (bits, group))
}

/// (bytes per block, values per block, affine bits, group size).
fn layout(dtype: GgmlDType) -> Option<(usize, usize, i32, usize)> {
    Some(match dtype {
        GgmlDType::Q4_0 => (18, 32, 4, GROUP),
        GgmlDType::Q4_1 => (20, 32, 4, GROUP),
        GgmlDType::Q8_0 => (34, 32, 8, GROUP),
        GgmlDType::Q5_0 => (22, 32, 8, GROUP),
        GgmlDType::Q5_1 => (24, 32, 8, GROUP),
        GgmlDType::Q4K => (144, 256, 4, GROUP),
        GgmlDType::Q5K => (176, 256, 8, GROUP),
        GgmlDType::Q6K => (210, 256, 8, 16),
        _ => return None,
    })
}

fn half(b: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([b[at], b[at + 1]]).to_f32()
}

/// Decodes one block's unsigned values into `q` and appends its groups'
/// scales and biases; returns the number of groups.
fn decode(dtype: GgmlDType, b: &[u8], q: &mut [u8], out: &mut Affine) -> usize {
    let mut group = |scale: f32, bias: f32| {
        out.scales.push(scale);
        out.biases.push(bias);
    };
    match dtype {
        GgmlDType::Q4_0 | GgmlDType::Q4_1 => {
            let (d, m, qs) = match dtype {
                GgmlDType::Q4_0 => (half(b, 0), -8.0 * half(b, 0), &b[2..18]),
                _ => (half(b, 0), half(b, 2), &b[4..20]),
            };
            for (j, &byte) in qs.iter().enumerate() {
                q[j] = byte & 0xF;
                q[j + 16] = byte >> 4;
            }
            group(d, m);
            1
        }
        GgmlDType::Q8_0 => {
            let d = half(b, 0);
            for (j, &byte) in b[2..34].iter().enumerate() {
                q[j] = (byte as i8 as i16 + 128) as u8;
            }
            group(d, -128.0 * d);
            1
        }
        GgmlDType::Q5_0 | GgmlDType::Q5_1 => {
            let (d, m, rest) = match dtype {
                GgmlDType::Q5_0 => (half(b, 0), -16.0 * half(b, 0), &b[2..]),
                _ => (half(b, 0), half(b, 2), &b[4..]),
            };
            let qh = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]);
            for (j, &byte) in rest[4..20].iter().enumerate() {
                q[j] = (byte & 0xF) | (((qh >> j) & 1) << 4) as u8;
                q[j + 16] = (byte >> 4) | (((qh >> (j + 16)) & 1) << 4) as u8;
            }
            group(d, m);
            1
        }
        GgmlDType::Q4K | GgmlDType::Q5K => {
            let (d, dmin) = (half(b, 0), half(b, 2));
            let scales = &b[4..16];
            let (qh, qs) = match dtype {
                GgmlDType::Q4K => (None, &b[16..144]),
                _ => (Some(&b[16..48]), &b[48..176]),
            };
            // Four pairs of groups; each pair shares 32 bytes of low nibbles.
            for pair in 0..4 {
                let low = &qs[pair * 32..pair * 32 + 32];
                for half_ in 0..2 {
                    let j = pair * 2 + half_;
                    let (sc, m) = scale_min_k4(j, scales);
                    group(d * sc as f32, -(dmin * m as f32));
                    for l in 0..32 {
                        let nibble = if half_ == 0 {
                            low[l] & 0xF
                        } else {
                            low[l] >> 4
                        };
                        let high = qh.map_or(0, |h| ((h[l] >> j) & 1) << 4);
                        q[j * 32 + l] = nibble | high;
                    }
                }
            }
            8
        }
        GgmlDType::Q6K => {
            // ql: low 4 bits, qh: high 2 bits, sc: 16 signed scales, d last.
            // Each half of 128 values takes 64 bytes of ql and 32 of qh;
            // byte l of each serves four values, 32 apart.
            let d = half(b, 208);
            for h in 0..2 {
                let (ql, qh) = (&b[h * 64..h * 64 + 64], &b[128 + h * 32..128 + h * 32 + 32]);
                let v = &mut q[h * 128..h * 128 + 128];
                for l in 0..32 {
                    v[l] = (ql[l] & 0xF) | ((qh[l] & 3) << 4);
                    v[l + 32] = (ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4);
                    v[l + 64] = (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4);
                    v[l + 96] = (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4);
                }
            }
            for &sc in &b[192..208] {
                let scale = d * sc as i8 as f32;
                group(scale, -32.0 * scale);
            }
            16
        }
        _ => unreachable!("layout() admits only the types above"),
    }
}

/// The 6-bit scale and min of group `j` of a K-quant super-block.
fn scale_min_k4(j: usize, s: &[u8]) -> (u8, u8) {
    if j < 4 {
        (s[j] & 63, s[j + 4] & 63)
    } else {
        (
            (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4),
            (s[j + 4] >> 4) | ((s[j] >> 6) << 4),
        )
    }
}

/// Appends 32 values as MLX packs them: value `k` at bits `(k·bits) % 32`
/// of word `k·bits / 32`.
fn pack(values: &[u8], bits: i32, packed: &mut Vec<u32>) {
    let per_word = 32 / bits as usize;
    for word in values.chunks_exact(per_word) {
        let w = word
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, &v)| acc | (v as u32) << (i * bits as usize));
        packed.push(w);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::quantized::ggml_file::qtensor_from_ggml;
    use candle_core::Device;
    use mlx_rs::ops::dequantize;
    use mlx_rs::Array;
    use rand_core::{RngCore, SeedableRng};

    /// Random blocks of `dtype` whose f16 fields are finite, sane scales.
    fn random_blocks(dtype: GgmlDType, blocks: usize, seed: u64) -> Vec<u8> {
        let (bytes, _, _, _) = layout(dtype).unwrap();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let mut raw = vec![0u8; bytes * blocks];
        rng.fill_bytes(&mut raw);
        let scale = |rng: &mut rand_chacha::ChaCha8Rng| {
            f16::from_f32((rng.next_u32() % 1000) as f32 / 40_000.0 + 1e-4).to_le_bytes()
        };
        for b in raw.chunks_exact_mut(bytes) {
            if dtype == GgmlDType::Q6K {
                // d is the block's last field.
                b[208..210].copy_from_slice(&scale(&mut rng));
                continue;
            }
            b[0..2].copy_from_slice(&scale(&mut rng));
            if matches!(
                dtype,
                GgmlDType::Q4_1 | GgmlDType::Q5_1 | GgmlDType::Q4K | GgmlDType::Q5K
            ) {
                b[2..4].copy_from_slice(&scale(&mut rng));
            }
        }
        raw
    }

    /// Every convertible type: MLX's dequantization of the repacked form
    /// equals candle's own dequantization of the blocks (the reference,
    /// ggml's formulas), to f32 rounding of the same sums.
    #[test]
    fn repacked_blocks_dequantize_like_candle() {
        for dtype in [
            GgmlDType::Q4_0,
            GgmlDType::Q4_1,
            GgmlDType::Q8_0,
            GgmlDType::Q5_0,
            GgmlDType::Q5_1,
            GgmlDType::Q4K,
            GgmlDType::Q5K,
            GgmlDType::Q6K,
        ] {
            let (rows, cols) = (3usize, 512usize);
            let (bytes, per_block, _, _) = layout(dtype).unwrap();
            let raw = random_blocks(dtype, rows * cols / per_block, 7);
            assert_eq!(raw.len(), rows * cols / per_block * bytes);
            let want = qtensor_from_ggml(dtype, &raw, vec![rows, cols], &Device::Cpu)
                .unwrap()
                .dequantize(&Device::Cpu)
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1::<f32>()
                .unwrap();

            let a = repack(dtype, &raw, cols).unwrap();
            if a.half_exact {
                for v in a.scales.iter().chain(&a.biases) {
                    assert_eq!(
                        f16::from_f32(*v).to_f32(),
                        *v,
                        "{dtype:?}: {v} is not an f16"
                    );
                }
            }
            let (r, c) = (rows as i32, cols as i32);
            let w = Array::from_slice(&a.packed, &[r, c * a.bits / 32]);
            let g = a.group as i32;
            let s = Array::from_slice(&a.scales, &[r, c / g]);
            let b = Array::from_slice(&a.biases, &[r, c / g]);
            let got = dequantize(&w, &s, Some(&b), g, a.bits).unwrap();
            let got: Vec<f32> = got.as_slice::<f32>().to_vec();
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                let tol = 1e-6 * w.abs().max(1.0);
                assert!(
                    (g - w).abs() <= tol,
                    "{dtype:?} value {i}: repacked {g}, candle {w}"
                );
            }
        }
    }

    /// A GGUF file with a Q6_K matrix: where afm's CPU primitive runs, it
    /// loads packed (8-bit, groups of 16, the group recorded for the
    /// tensor) and multiplies like candle's dequantization of the blocks;
    /// elsewhere it loads as f32.
    #[test]
    fn a_q6k_matrix_loads_packed_in_groups_of_16() {
        use crate::cpu::qmm;
        use crate::layers::Linear;
        use crate::loading::gguf::GgufModelFile;
        use crate::loading::weights::{TensorMap, WeightMode};
        use candle_core::quantized::gguf_file;

        let (rows, cols) = (8usize, 512usize);
        let raw = random_blocks(GgmlDType::Q6K, rows * cols / 256, 11);
        let t = qtensor_from_ggml(GgmlDType::Q6K, &raw, vec![rows, cols], &Device::Cpu).unwrap();
        let want_w = t.dequantize(&Device::Cpu).unwrap().flatten_all().unwrap();
        let want_w = Array::from_slice(
            &want_w.to_vec1::<f32>().unwrap(),
            &[rows as i32, cols as i32],
        );
        let path = std::env::temp_dir().join(format!("afm-q6k-{}.gguf", std::process::id()));
        {
            let mut f = std::fs::File::create(&path).unwrap();
            let arch = gguf_file::Value::String("llama".into());
            gguf_file::write(
                &mut f,
                &[("general.architecture", &arch)],
                &[("blk.0.ffn_down.weight", &t)],
            )
            .unwrap();
        }
        let file = GgufModelFile::open(&path).unwrap();
        let map = TensorMap::from_gguf(&file, WeightMode::for_platform(), &[]).unwrap();
        std::fs::remove_file(&path).unwrap();
        let lin = map.linear("model.layers.0.mlp.down_proj").unwrap();
        match (&lin, qmm::path().is_primitive()) {
            (Linear::Quantized(q), true) => assert_eq!((q.bits, q.group_size), (8, 16)),
            (Linear::Dense(_), false) => {}
            _ => panic!(
                "Q6_K loaded packed: {}, primitive: {}",
                matches!(lin, Linear::Quantized(_)),
                qmm::path()
            ),
        }
        let x = Array::from_slice(
            &(0..cols)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) / 50.0)
                .collect::<Vec<_>>(),
            &[1, cols as i32],
        );
        let got = lin.forward(&x).unwrap();
        let want = x.matmul(want_w.t()).unwrap();
        let d = got
            .subtract(&want)
            .unwrap()
            .abs()
            .unwrap()
            .max(None)
            .unwrap()
            .item_exact::<f32>();
        let scale = want.abs().unwrap().max(None).unwrap().item_exact::<f32>();
        assert!(d <= 2e-5 * scale.max(1.0), "Q6_K product off by {d}");
    }

    #[test]
    fn types_without_an_affine_form_are_refused() {
        assert!(repack(GgmlDType::Q3K, &[0; 110], 256).is_none());
        assert!(repack(GgmlDType::F32, &[0; 16], 4).is_none());
        // A row length that does not hold whole blocks.
        assert!(repack(GgmlDType::Q4K, &[0; 144], 128).is_none());
    }
}
