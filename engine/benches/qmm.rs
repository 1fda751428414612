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
//! `cargo bench -p afm-engine --bench qmm` (`AFM_QMM_THREADS` sets the
//! kernel's threads).

use std::hint::black_box;
use std::time::Duration;

use afm_engine::cpu::qmm;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use mlx_rs::ops::{matmul, quantize};
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

criterion_group!(qmm_benches, benches);
criterion_main!(qmm_benches);
