//! The one matrix product the model needs: `x · wᵀ` for a few rows of `x` (a query is about
//! 10–40 word pieces) against a weight matrix stored as `PyTorch` stores it, each output then
//! finished in place (bias, GELU).
//!
//! Written for short inputs rather than taken from a general GEMM: a general kernel repacks
//! the whole weight matrix on every call, which for a query of 18 pieces cost more than the
//! multiplications (BENCHMARKS.md "the product kernel"). Here each weight row is read once,
//! straight from where it lies, and multiplied into a small block of input rows held in
//! registers. `pulp` picks the widest instructions the CPU has at run time (AVX2 + FMA on
//! x86-64, NEON on arm64, plain multiply-adds otherwise — about 10× slower, still usable), in
//! safe code. Every output is summed in one fixed order (lane by lane, the lanes, then the
//! inputs past the last full vector) whatever the block or thread, so a text embeds to the
//! same bits on a search's two threads and on the background's one.
//!
//! A search embeds its query on up to two threads (it waits for the answer): the outputs are
//! split in two halves, one on the calling thread and one on rayon's pool. The background
//! embedding of tools uses one, so it never takes more than a core from searches and
//! servers, and it steps aside while a search is embedding: its products go a few rows at a
//! time, and between two it waits while a search is embedding — never longer than it has
//! worked since it last waited, so a search finds both cores and a stream of searches at
//! most halves the embedding's pace instead of stopping it.

// pulp runs code with the CPU's instructions only where it is inlined into its dispatch, so
// everything a product or GELU calls on the way must be `#[inline(always)]`.
#![expect(clippy::inline_always, reason = "pulp's dispatch reaches only inlined code")]

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use pulp::{Simd, WithSimd};

thread_local! {
    /// Threads a product on this thread may use (1 on the background thread).
    static THREADS: Cell<usize> = const { Cell::new(2) };
    /// How long the background thread may still wait for searches: the time it has worked
    /// since it last waited, at most [`MAX_STEP_ASIDE`].
    static CREDIT: Cell<Duration> = const { Cell::new(Duration::ZERO) };
}

/// Searches embedding their query right now.
static SEARCHING: AtomicUsize = AtomicUsize::new(0);
/// Rows of a background product done between two looks at [`SEARCHING`] (a 384 × 1536
/// product of 16 rows is about half a millisecond on one core here).
const BACKGROUND_ROWS: usize = 16;
/// The longest the background waits for searches at once (a query embeds in well under it).
const MAX_STEP_ASIDE: Duration = Duration::from_millis(30);
/// Below this many multiply-adds a second thread costs more to wake than it saves: for a
/// word piece or two per product, and the split of a 10k-tool cosine (3.8 M) pays. 64 k,
/// 1 M and 4 M compared end to end over the development queries (BENCHMARKS.md, "The product
/// kernel"): 1 M was as fast as the best of the others in every run.
const SPLIT_ABOVE: usize = 1 << 20;
/// Input rows multiplied together (each block's sums live in registers: 3 rows × 4 weight
/// rows is 12 of AVX2's 16 vector registers, plus 3 inputs and 1 weight; of the blocks tried
/// while writing this, 2 × 4 to 4 × 3, it was among the fastest from 12 to 40 rows).
const ROWS: usize = 3;
/// Weight rows multiplied together.
const COLUMNS: usize = 4;

/// Run `f` with products on this thread using one thread only, stepping aside for searches.
pub fn single_threaded<T>(f: impl FnOnce() -> T) -> T {
    let before = THREADS.with(|t| t.replace(1));
    let out = f();
    THREADS.with(|t| t.set(before));
    out
}

/// Run `f` (a search embedding its query) with background products held back meanwhile.
pub fn searching<T>(f: impl FnOnce() -> T) -> T {
    struct Done;
    impl Drop for Done {
        fn drop(&mut self) {
            SEARCHING.fetch_sub(1, Ordering::AcqRel);
        }
    }
    SEARCHING.fetch_add(1, Ordering::AcqRel);
    let _done = Done;
    f()
}

/// On the background thread: wait while a search embeds, within the credit.
fn step_aside() {
    let credit = CREDIT.with(Cell::get);
    let started = Instant::now();
    while SEARCHING.load(Ordering::Acquire) > 0 && started.elapsed() < credit {
        std::thread::sleep(Duration::from_micros(200));
    }
    CREDIT.with(|c| c.set(credit.saturating_sub(started.elapsed())));
}

/// On the background thread: `worked` more time earns as much waiting.
fn earn(worked: Duration) {
    CREDIT.with(|c| c.set((c.get() + worked).min(MAX_STEP_ASIDE)));
}

/// A weight matrix: `outputs × inputs`, row-major (as `PyTorch` stores a linear layer).
#[derive(Debug, Clone, Copy)]
pub struct Weights<'a> {
    pub matrix: &'a [f32],
    pub inputs: usize,
    pub outputs: usize,
}

/// `out[r × outputs + k] = finish(k, x[r] · w[k])` for the `n` rows of `x` (`n × inputs`,
/// row-major).
///
/// # Panics
/// When a slice is shorter than its dimensions say.
pub fn product(x: &[f32], n: usize, w: Weights<'_>, finish: impl Fn(usize, f32) -> f32 + Sync, out: &mut [f32]) {
    assert!(
        x.len() >= n * w.inputs && w.matrix.len() >= w.outputs * w.inputs && out.len() >= n * w.outputs,
        "matrix sizes do not match"
    );
    if n == 0 || w.outputs == 0 {
        return;
    }
    let out = &mut out[..n * w.outputs];
    if THREADS.with(Cell::get) == 1 {
        // The background: a few rows at a time, letting searches go first.
        for (block, rows) in out.chunks_mut(BACKGROUND_ROWS * w.outputs).enumerate() {
            step_aside();
            let started = Instant::now();
            let start = block * BACKGROUND_ROWS;
            let mut rows: Vec<&mut [f32]> = rows.chunks_exact_mut(w.outputs).collect();
            columns(&x[start * w.inputs..], w, 0, &finish, &mut rows);
            earn(started.elapsed());
        }
        return;
    }
    let half = w.outputs.div_ceil(2).next_multiple_of(COLUMNS);
    if n * w.inputs * w.outputs > SPLIT_ABOVE && half < w.outputs && rayon::current_num_threads() > 1 {
        // Two halves of every row: the second on rayon's pool, the first here meanwhile.
        let (mut first, mut second): (Vec<&mut [f32]>, Vec<&mut [f32]>) = out
            .chunks_exact_mut(w.outputs)
            .map(|row| row.split_at_mut(half))
            .unzip();
        let finish = &finish;
        rayon::in_place_scope(|scope| {
            scope.spawn(|_| columns(x, w, half, finish, &mut second));
            columns(x, w, 0, finish, &mut first);
        });
    } else {
        let mut rows: Vec<&mut [f32]> = out.chunks_exact_mut(w.outputs).collect();
        columns(x, w, 0, &finish, &mut rows);
    }
}

/// Outputs `first..first + width` of every row, where `dst` holds each row's `width` of them.
fn columns(
    x: &[f32],
    w: Weights<'_>,
    first: usize,
    finish: &(impl Fn(usize, f32) -> f32 + Sync),
    dst: &mut [&mut [f32]],
) {
    pulp::Arch::new().dispatch(Columns {
        x,
        w,
        first,
        finish,
        dst,
    });
}

struct Columns<'a, 'b, F> {
    x: &'a [f32],
    w: Weights<'a>,
    first: usize,
    finish: &'a F,
    dst: &'a mut [&'b mut [f32]],
}

impl<F: Fn(usize, f32) -> f32> WithSimd for Columns<'_, '_, F> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) {
        let Self {
            x,
            w,
            first,
            finish,
            dst,
        } = self;
        let width = dst.first().map_or(0, |row| row.len());
        let mut k = 0;
        while k + COLUMNS <= width {
            weight_rows::<S, COLUMNS>(simd, x, w, (first, k), finish, dst);
            k += COLUMNS;
        }
        while k < width {
            weight_rows::<S, 1>(simd, x, w, (first, k), finish, dst);
            k += 1;
        }
    }
}

/// Outputs `first + k .. first + k + C` of every row, into columns `k..k + C` of `dst`.
#[inline(always)]
fn weight_rows<S: Simd, const C: usize>(
    simd: S,
    x: &[f32],
    w: Weights<'_>,
    (first, k): (usize, usize),
    finish: &impl Fn(usize, f32) -> f32,
    dst: &mut [&mut [f32]],
) {
    let width = w.inputs;
    let mut weights: [&[f32]; C] = [&[]; C];
    for (c, weight) in weights.iter_mut().enumerate() {
        *weight = &w.matrix[(first + k + c) * width..][..width];
    }
    let n = dst.len();
    let mut row = 0;
    while row + ROWS <= n {
        let mut rows: [&[f32]; ROWS] = [&[]; ROWS];
        for (d, input) in rows.iter_mut().enumerate() {
            *input = &x[(row + d) * width..][..width];
        }
        let sums = block::<S, ROWS, C>(simd, rows, weights);
        store(&sums, first + k, finish, &mut dst[row..row + ROWS], k);
        row += ROWS;
    }
    while row < n {
        let input = &x[row * width..][..width];
        let sums = block::<S, 1, C>(simd, [input], weights);
        store(&sums, first + k, finish, &mut dst[row..=row], k);
        row += 1;
    }
}

/// Finished sums of outputs `output..output + C` into columns `k..k + C` of `rows`.
#[inline(always)]
fn store<const R: usize, const C: usize>(
    sums: &[[f32; C]; R],
    output: usize,
    finish: &impl Fn(usize, f32) -> f32,
    rows: &mut [&mut [f32]],
    k: usize,
) {
    for (row, row_sums) in rows.iter_mut().zip(sums) {
        for (c, (value, &sum)) in row[k..k + C].iter_mut().zip(row_sums).enumerate() {
            *value = finish(output + c, sum);
        }
    }
}

/// The `R × C` dot products of `rows` with `weights`, each a vector of running sums (then
/// added across lanes) plus the inputs past the last full vector. Plain loops over fixed
/// sizes, no closures: the sums must stay in registers.
#[inline(always)]
fn block<S: Simd, const R: usize, const C: usize>(simd: S, rows: [&[f32]; R], weights: [&[f32]; C]) -> [[f32; C]; R] {
    let len = rows[0].len() / S::F32_LANES;
    let (row_vectors, row_tails) = split_vectors::<S, R>(rows, len);
    let (weight_vectors, weight_tails) = split_vectors::<S, C>(weights, len);
    let zero = simd.splat_f32s(0.0);
    let mut sums = [[zero; C]; R];
    for j in 0..len {
        let mut inputs = [zero; R];
        for r in 0..R {
            inputs[r] = row_vectors[r][j];
        }
        for c in 0..C {
            let weight = weight_vectors[c][j];
            for r in 0..R {
                sums[r][c] = simd.mul_add_e_f32s(inputs[r], weight, sums[r][c]);
            }
        }
    }
    let mut out = [[0.0; C]; R];
    for r in 0..R {
        for c in 0..C {
            let mut tail = 0.0;
            for (a, b) in row_tails[r].iter().zip(weight_tails[c]) {
                tail += a * b;
            }
            out[r][c] = simd.reduce_sum_f32s(sums[r][c]) + tail;
        }
    }
    out
}

/// Each slice as its first `len` whole vectors and the values past them.
#[inline(always)]
fn split_vectors<S: Simd, const N: usize>(slices: [&[f32]; N], len: usize) -> ([&[S::f32s]; N], [&[f32]; N]) {
    let mut vectors: [&[S::f32s]; N] = [&[]; N];
    let mut tails: [&[f32]; N] = [&[]; N];
    for i in 0..N {
        let (whole, tail) = S::as_simd_f32s(slices[i]);
        vectors[i] = &whole[..len];
        tails[i] = tail;
    }
    (vectors, tails)
}

/// BERT's exact GELU, `x·Φ(x) = x/2 · (1 + erf(x/√2))`, over `values` in place, a vector at
/// a time: no call into libm's `exp`, which took 4 % of the CPU time of a search when it ran scalar.
pub fn gelu(values: &mut [f32]) {
    pulp::Arch::new().dispatch(Gelu(values));
}

struct Gelu<'a>(&'a mut [f32]);

impl WithSimd for Gelu<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) {
        let (vectors, tail) = S::as_mut_simd_f32s(self.0);
        for v in vectors {
            *v = gelu_lanes(simd, *v);
        }
        let last = gelu_lanes(simd, simd.partial_load_f32s(tail));
        simd.partial_store_f32s(tail, last);
    }
}

/// The error function's rational approximation that Eigen and XLA use (odd polynomial of
/// degree 13 over even of degree 8, input clamped to ±4 where erf is ±1 in f32): within
/// 3.5e-7 of erf everywhere (f32), in multiply-adds and one division.
#[inline(always)]
#[expect(
    clippy::unreadable_literal,
    clippy::excessive_precision,
    reason = "published coefficients, copied as printed"
)]
fn gelu_lanes<S: Simd>(simd: S, x: S::f32s) -> S::f32s {
    const NUMERATOR: [f32; 7] = [
        -2.72614225801306e-10,
        2.77068142495902e-08,
        -2.10102402082508e-06,
        -5.69250639462346e-05,
        -7.34990630326855e-04,
        -2.95459980854025e-03,
        -1.60960333262415e-02,
    ];
    const DENOMINATOR: [f32; 5] = [
        -1.45660718464996e-05,
        -2.13374055278905e-04,
        -1.68282697438203e-03,
        -7.37332916720468e-03,
        -1.42647390514189e-02,
    ];
    let half = simd.splat_f32s(0.5);
    let z = simd.mul_f32s(x, simd.splat_f32s(std::f32::consts::FRAC_1_SQRT_2));
    let z = simd.max_f32s(simd.min_f32s(z, simd.splat_f32s(4.0)), simd.splat_f32s(-4.0));
    let z2 = simd.mul_f32s(z, z);
    let horner = |coefficients: &[f32]| {
        let mut sum = simd.splat_f32s(coefficients[0]);
        for &c in &coefficients[1..] {
            sum = simd.mul_add_e_f32s(sum, z2, simd.splat_f32s(c));
        }
        sum
    };
    let erf = simd.div_f32s(simd.mul_f32s(z, horner(&NUMERATOR)), horner(&DENOMINATOR));
    // x/2 · (1 + erf) = x/2 + x/2 · erf
    let half_x = simd.mul_f32s(half, x);
    simd.mul_add_e_f32s(half_x, erf, half_x)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(x: &[f32], n: usize, w: Weights<'_>) -> Vec<f32> {
        let mut out = vec![0.0; n * w.outputs];
        for r in 0..n {
            for k in 0..w.outputs {
                out[r * w.outputs + k] = (0..w.inputs)
                    .map(|i| x[r * w.inputs + i] * w.matrix[k * w.inputs + i])
                    .sum();
            }
        }
        out
    }

    fn values(count: usize, seed: usize) -> Vec<f32> {
        // Small integers: every sum is exact in f32 whatever the order.
        (0..count)
            .map(|i| f32::from(u8::try_from((i * 7 + seed) % 11).unwrap()) - 5.0)
            .collect()
    }

    /// Inputs `n × inputs` and weights `outputs × inputs` of small integers.
    fn integer_case(n: usize, inputs: usize, outputs: usize) -> (Vec<f32>, Vec<f32>) {
        (values(n * inputs, 1), values(outputs * inputs, 3))
    }

    fn weights(matrix: &[f32], inputs: usize, outputs: usize) -> Weights<'_> {
        Weights {
            matrix,
            inputs,
            outputs,
        }
    }

    #[test]
    #[expect(clippy::float_cmp, reason = "small integers are exact in f32")]
    fn multiplies_by_the_transposed_weights_and_finishes_each_output() {
        // x = [[1, 2], [3, 4]], w = [[1, 0], [0, 1], [1, 1]] (3 outputs × 2 inputs).
        let x = [1.0, 2.0, 3.0, 4.0];
        let w = Weights {
            matrix: &[1.0, 0.0, 0.0, 1.0, 1.0, 1.0],
            inputs: 2,
            outputs: 3,
        };
        let mut out = [0.0; 6];
        product(&x, 2, w, |k, v| v + [0.0, 10.0, 20.0][k], &mut out);
        assert_eq!(out, [1.0, 12.0, 23.0, 3.0, 14.0, 27.0]);
        let mut single = [0.0; 6];
        single_threaded(|| product(&x, 2, w, |_, v| v, &mut single));
        assert_eq!(single, [1.0, 2.0, 3.0, 3.0, 4.0, 7.0]);
    }

    #[test]
    fn every_shape_matches_the_textbook_product_on_one_thread_and_two() {
        // Row counts around the 3-row block and the background's 16, output counts around the
        // 4-column block and the split, input widths with and without a partial vector.
        for n in [1, 2, 3, 4, 7, 17, 40] {
            for outputs in [1, 3, 4, 5, 9, 130] {
                for inputs in [1, 7, 8, 19, 64] {
                    let (x, matrix) = integer_case(n, inputs, outputs);
                    let w = weights(&matrix, inputs, outputs);
                    let expected = naive(&x, n, w);
                    let mut two = vec![f32::NAN; n * outputs];
                    product(&x, n, w, |_, v| v, &mut two);
                    assert_eq!(two, expected, "{n} × {inputs} · ({outputs} × {inputs})ᵀ");
                    let mut one = vec![f32::NAN; n * outputs];
                    single_threaded(|| product(&x, n, w, |_, v| v, &mut one));
                    assert_eq!(one, expected, "{n} × {inputs} · ({outputs} × {inputs})ᵀ, one thread");
                }
            }
        }
    }

    #[test]
    fn the_cpus_vector_unit_is_the_path_these_tests_run() {
        // The shape and bits tests go through `Arch::new()`: they cover NEON on arm64 (run
        // there by `scripts/test-arm64.sh` under qemu) and AVX2+FMA on x86-64 only if pulp
        // picks those paths.
        #[cfg(target_arch = "aarch64")]
        assert!(matches!(pulp::Arch::new(), pulp::Arch::Neon(_)));
        #[cfg(target_arch = "x86_64")]
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            assert!(matches!(pulp::Arch::new(), pulp::Arch::V3(_)));
        }
    }

    #[test]
    fn the_scalar_fallback_for_cpus_without_vector_units_matches_too() {
        // What a CPU without AVX2 (or a target pulp has no vectors for) runs.
        let (n, inputs, outputs) = (5, 19, 9);
        let (x, matrix) = integer_case(n, inputs, outputs);
        let w = weights(&matrix, inputs, outputs);
        let mut out = vec![f32::NAN; n * outputs];
        let mut rows: Vec<&mut [f32]> = out.chunks_exact_mut(outputs).collect();
        let finish = |_: usize, v: f32| v;
        Columns {
            x: &x,
            w,
            first: 0,
            finish: &finish,
            dst: &mut rows,
        }
        .with_simd(pulp::Scalar);
        assert_eq!(out, naive(&x, n, w));
        let mut values = vec![-1.0, 0.0, 1.0];
        Gelu(&mut values).with_simd(pulp::Scalar);
        let expected = [-0.158_655_3, 0.0, 0.841_344_8];
        assert!(
            values.iter().zip(expected).all(|(got, want)| (got - want).abs() < 1e-6),
            "{values:?}"
        );
    }

    #[test]
    #[expect(clippy::excessive_precision, reason = "reference values as Python prints them")]
    fn gelu_is_x_times_the_normal_cdf() {
        // Reference values from Python's math.erf: 0.5·x·(1 + erf(x/√2)). 21 values, so
        // both the vector lanes and the scalar tail are checked.
        let reference = [
            (-5.0, -1.433_257_9e-6),
            (-3.0, -0.004_049_694),
            (-1.0, -0.158_655_25),
            (-0.5, -0.154_268_77),
            (0.0, 0.0),
            (0.5, 0.345_731_23),
            (1.0, 0.841_344_75),
            (2.0, 1.954_499_7),
            (3.0, 2.995_950_3),
            (10.0, 10.0),
        ];
        let mut values: Vec<f32> = reference.iter().chain(&reference).map(|(x, _)| *x).collect();
        values.push(-1.0);
        gelu(&mut values);
        for (got, (x, want)) in values
            .iter()
            .zip(reference.iter().chain(&reference).chain(&reference[2..3]))
        {
            assert!(
                (got - want).abs() <= 1e-6 * want.abs().max(1.0),
                "gelu({x}) = {got}, expected {want}"
            );
        }
    }

    #[test]
    fn one_thread_and_two_give_the_same_bits() {
        // Real-valued inputs, large enough to split (on a pool of two even on a one-core
        // runner): each output is one sum in one order on either thread.
        let (n, inputs, outputs) = (20, 384, 600);
        assert!(n * inputs * outputs > SPLIT_ABOVE);
        let wave = |i: usize, step: usize, period: usize| f32::from(u8::try_from(i * step % period).unwrap()).sin();
        let x: Vec<f32> = (0..n * inputs).map(|i| wave(i, 37, 101)).collect();
        let matrix: Vec<f32> = (0..outputs * inputs).map(|i| wave(i, 53, 97)).collect();
        let w = weights(&matrix, inputs, outputs);
        let mut two = vec![0.0; n * outputs];
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        pool.install(|| product(&x, n, w, |_, v| v, &mut two));
        let mut one = vec![0.0; n * outputs];
        single_threaded(|| product(&x, n, w, |_, v| v, &mut one));
        assert!(two.iter().zip(&one).all(|(a, b)| a.to_bits() == b.to_bits()));
    }
}
