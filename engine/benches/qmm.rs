//! criterion benchmark of the CPU quantized matmul alone (afm's primitive,
//! `afm_engine::cpu::qmm`), for every weight format the engine keeps packed
//! on the CPU, at 1, 8, 16, 32, 64 and 256 rows of x, beside the f32 BLAS product it
//! replaces and the machine's memory read bandwidth measured in the same
//! run; from 8 rows also the path default mode takes from
//! `qmm::BLAS_MIN_ROWS` rows (tiles of W dequantized, then BLAS), which
//! places that threshold. Throughput is bytes of weights read per call (packed values +
//! scales + biases; the f32 matrix for BLAS), so the figures compare with
//! the bandwidth line directly.
//!
//! Weights are cold, as in a decode step: every call reads a different
//! copy, and the copies add up to well over the last-level cache.
//!
//! Formats: MLX affine 4- and 8-bit in groups of 32, 64 and 128. The GGUF
//! types arrive as one of these (Q4_0, Q4_1 and Q4_K as 4-bit/32; Q8_0,
//! Q5_0, Q5_1 and Q5_K as 8-bit/32: `loading::gguf_affine`); Q6_K and other
//! types without an affine form are dequantized to f32, i.e. the BLAS line.
//!
//! The gather form (routed experts, `gather/...`): a stack of 128 experts
//! of 768×2048 (Qwen3-30B-A3B's gate and up projections), 8 chosen per row,
//! at 1, 8 and 32 rows: afm's primitive against MLX's CPU `gather_qmm` and
//! the f32 `gather_mm` over the dequantized stack that the engine used
//! before. Throughput counts the bytes of the distinct experts the rows
//! chose.
//!
//! `cargo bench -p afm-engine --bench qmm` (`AFM_QMM_THREADS` sets the
//! kernel's threads).

use std::hint::black_box;
use std::time::Duration;

use afm_engine::cpu::qmm;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use mlx_rs::ops::{dequantize, expand_dims_axes, gather_mm, gather_qmm, matmul, quantize};
use mlx_rs::transforms::eval;
use mlx_rs::{Array, Dtype};
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

/// A projection of the size of a small model's MLP (K -> N).
const K: i32 = 2048;
const N: i32 = 2048;
/// Weight bytes all copies of one format add up to (beyond the L3 cache).
const COLD_BYTES: usize = 192 << 20;
/// Bytes the bandwidth probe streams.
const STREAM_BYTES: usize = 512 << 20;

/// `[rows, cols]` of values uniform in ±`half`, from a fixed seed. (mlx-rs's
/// `random` seeds itself with a macOS-only clock and does not link here.)
fn uniform(rows: i32, cols: i32, half: f32, seed: u64) -> Array {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let v: Vec<f32> = (0..rows * cols)
        .map(|_| half * ((rng.next_u32() >> 8) as f32 / (1u32 << 23) as f32 - 1.0))
        .collect();
    Array::from_slice(&v, &[rows, cols])
}

struct Packed {
    w: Array,
    scales: Array,
    biases: Array,
}

fn settings(c: &mut Criterion) -> criterion::BenchmarkGroup<'_, criterion::measurement::WallTime> {
    let mut g = c.benchmark_group("qmm");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    g
}

fn benches(c: &mut Criterion) {
    println!("quantized matmul path: {}", qmm::path());
    let mut g = settings(c);

    // Memory read bandwidth: one thread summing a buffer far beyond cache.
    let buf: Vec<u64> = (0..STREAM_BYTES / 8).map(|i| i as u64).collect();
    g.throughput(Throughput::Bytes(STREAM_BYTES as u64));
    g.bench_function("memory_read_bandwidth", |b| {
        b.iter(|| black_box(buf.iter().fold(0u64, |a, &v| a.wrapping_add(v))))
    });
    drop(buf);

    let w = uniform(N, K, 0.05, 1);
    for rows in [1, 8, 16, 32, 64, 256] {
        let x = uniform(rows, K, 1.0, 2).reshape(&[1, rows, K]).unwrap();
        eval([&x, &w]).unwrap();

        // f32 BLAS: what every quantized weight was before (and Q6_K is).
        let copies = (COLD_BYTES / w.nbytes()).max(2);
        let dense: Vec<Array> = (0..copies).map(|i| &w + i as f32 * 1e-6).collect();
        eval(dense.iter()).unwrap();
        g.throughput(Throughput::Bytes(w.nbytes() as u64));
        let mut next = 0;
        g.bench_with_input(BenchmarkId::new("f32_blas", rows), &rows, |b, _| {
            b.iter(|| {
                next = (next + 1) % dense.len();
                let y = matmul(&x, dense[next].t()).unwrap();
                eval([&y]).unwrap();
            })
        });
        drop(dense);

        if !qmm::path().is_primitive() {
            continue;
        }
        for bits in [4, 8] {
            for group in [32, 64, 128] {
                let (q, s, b) = quantize(&w, group, bits).unwrap();
                // Checkpoints and GGUF blocks carry f16 scales and biases.
                let one = Packed {
                    w: q,
                    scales: s.as_dtype(Dtype::Float16).unwrap(),
                    biases: b.as_dtype(Dtype::Float16).unwrap(),
                };
                let bytes = one.w.nbytes() + one.scales.nbytes() + one.biases.nbytes();
                let copies = (COLD_BYTES / bytes).max(2);
                let all: Vec<Packed> = (0..copies)
                    .map(|i| Packed {
                        w: &one.w + Array::from_int(0).as_dtype(Dtype::Uint32).unwrap(),
                        scales: &one.scales + i as f32 * 0.0,
                        biases: one.biases.clone() + 0.0f32,
                    })
                    .map(|p| Packed {
                        scales: p.scales.as_dtype(Dtype::Float16).unwrap(),
                        biases: p.biases.as_dtype(Dtype::Float16).unwrap(),
                        w: p.w,
                    })
                    .collect();
                for p in &all {
                    eval([&p.w, &p.scales, &p.biases]).unwrap();
                }
                g.throughput(Throughput::Bytes(bytes as u64));
                if group == 32 && rows >= 8 {
                    // Default mode's path for many rows: tiles of W
                    // dequantized with AVX2, then BLAS.
                    let mut next = 0;
                    let id = BenchmarkId::new(format!("q{bits}_g{group}_dequant_blas"), rows);
                    g.bench_with_input(id, &rows, |bch, _| {
                        bch.iter(|| {
                            next = (next + 1) % all.len();
                            let p = &all[next];
                            let y = qmm::affine_qmm_blas_from(
                                &x, &p.w, &p.scales, &p.biases, group, bits, 1,
                            )
                            .unwrap();
                            eval([&y]).unwrap();
                        })
                    });
                }
                let mut next = 0;
                let id = BenchmarkId::new(format!("q{bits}_g{group}"), rows);
                g.bench_with_input(id, &rows, |bch, _| {
                    bch.iter(|| {
                        next = (next + 1) % all.len();
                        let p = &all[next];
                        let y = qmm::affine_qmm(&x, &p.w, &p.scales, &p.biases, group, bits, true)
                            .unwrap();
                        eval([&y]).unwrap();
                    })
                });
            }
        }
    }
    g.finish();
}

/// Routed experts through the three gathers; see the module's doc.
fn gather_benches(c: &mut Criterion) {
    const EXPERTS: i32 = 128;
    const PER_ROW: i32 = 8;
    const OUT: i32 = 768;
    let (bits, group) = (4, 64);
    let mut g = settings(c);
    // One random matrix tiled over the stack, offset per expert so no two
    // experts share bytes.
    let one = uniform(OUT, K, 0.05, 3);
    let stack = mlx_rs::ops::stack(
        &(0..EXPERTS)
            .map(|e| &one + e as f32 * 1e-4)
            .collect::<Vec<_>>(),
        0,
    )
    .unwrap();
    let (q, s, b) = quantize(&stack, group, bits).unwrap();
    let (s, b) = (
        s.as_dtype(Dtype::Float16).unwrap(),
        b.as_dtype(Dtype::Float16).unwrap(),
    );
    let f32_of = |a: &Array| a.as_dtype(Dtype::Float32).unwrap();
    // [E, K, OUT] for x @ w, as the engine kept dequantized experts.
    let dense = dequantize(&q, f32_of(&s), Some(&f32_of(&b)), group, bits)
        .unwrap()
        .transpose_axes(&[0, 2, 1])
        .unwrap()
        .contiguous()
        .unwrap();
    eval([&q, &s, &b, &dense]).unwrap();
    drop(stack);
    let expert_bytes = (q.nbytes() + s.nbytes() + b.nbytes()) / EXPERTS as usize;
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for rows in [1, 8, 32] {
        let x = uniform(rows, K, 1.0, 2);
        // Distinct experts per row, as a router's top-k picks them; 16
        // sets taken in turn, so calls do not find their experts in cache.
        let sets: Vec<Vec<u32>> = (0..16)
            .map(|_| {
                let mut ids = Vec::new();
                for _ in 0..rows {
                    let mut row: Vec<u32> = Vec::new();
                    while row.len() < PER_ROW as usize {
                        let e = rng.next_u32() % EXPERTS as u32;
                        if !row.contains(&e) {
                            row.push(e);
                        }
                    }
                    ids.extend(row);
                }
                ids
            })
            .collect();
        let distinct = sets
            .iter()
            .map(|ids| ids.iter().collect::<std::collections::BTreeSet<_>>().len())
            .sum::<usize>()
            / sets.len();
        let idx: Vec<Array> = sets
            .iter()
            .map(|ids| Array::from_slice(ids, &[rows, PER_ROW]))
            .collect();
        let xr = expand_dims_axes(&x, &[-2, -3]).unwrap();
        eval(idx.iter().chain([&x, &xr])).unwrap();
        let packed_bytes = (distinct * expert_bytes) as u64;
        let f32_bytes = (distinct * dense.nbytes() / EXPERTS as usize) as u64;
        let mut next = 0;
        let mut bench = |name: &str, bytes: u64, f: &dyn Fn(&Array) -> Array| {
            g.throughput(Throughput::Bytes(bytes));
            g.bench_with_input(BenchmarkId::new(name, rows), &rows, |bch, _| {
                bch.iter(|| {
                    next = (next + 1) % idx.len();
                    eval([&f(&idx[next])]).unwrap();
                })
            });
        };
        bench("gather/mlx_gather_qmm_q4_g64", packed_bytes, &|i| {
            gather_qmm(&xr, &q, &s, Some(&b), None, i, true, group, bits, false).unwrap()
        });
        bench("gather/f32_gather_mm", f32_bytes, &|i| {
            gather_mm(&xr, &dense, None, i, false).unwrap()
        });
        if qmm::path().is_primitive() {
            bench("gather/afm_q4_g64", packed_bytes, &|i| {
                qmm::gather_affine_qmm(&x, &q, &s, &b, i, group, bits, true).unwrap()
            });
        }
    }
    g.finish();
}

criterion_group!(qmm_benches, benches, gather_benches);
criterion_main!(qmm_benches);
