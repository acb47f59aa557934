//! The one matrix product the model needs, through the `gemm` crate (what candle uses
//! underneath; measured fastest here for one short sequence, BENCHMARKS.md "runtime").
//!
//! A search embeds its query on up to two threads (it waits for the answer); the background
//! embedding of tools uses one, so it never takes more than a core from searches and servers,
//! and it steps aside while a search embeds: its products go a few rows at a time, and
//! between two it waits while a search is embedding — never longer than it has worked since
//! it last waited, so a search finds both cores and a stream of searches at most halves the
//! embedding's pace instead of stopping it.

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

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

/// `out[n × o] += x[n × i] · wᵀ`, where `w` is `o × i` row-major.
pub fn matmul_transposed_add(x: &[f32], n: usize, inputs: usize, w: &[f32], outputs: usize, out: &mut [f32]) {
    assert!(
        x.len() >= n * inputs && w.len() >= outputs * inputs && out.len() >= n * outputs,
        "matrix sizes do not match"
    );
    if THREADS.with(Cell::get) == 1 {
        // The background: a few rows at a time, letting searches go first.
        for start in (0..n).step_by(BACKGROUND_ROWS) {
            let rows = BACKGROUND_ROWS.min(n - start);
            step_aside();
            let started = Instant::now();
            product(
                &x[start * inputs..],
                rows,
                inputs,
                w,
                outputs,
                &mut out[start * outputs..],
                gemm::Parallelism::None,
            );
            earn(started.elapsed());
        }
        return;
    }
    let threads = THREADS
        .with(Cell::get)
        .min(std::thread::available_parallelism().map_or(1, usize::from));
    let parallelism = if threads > 1 && n > 1 {
        gemm::Parallelism::Rayon(threads)
    } else {
        gemm::Parallelism::None
    };
    product(x, n, inputs, w, outputs, out, parallelism);
}

/// [`matmul_transposed_add`] once sizes are checked.
fn product(
    x: &[f32],
    n: usize,
    inputs: usize,
    w: &[f32],
    outputs: usize,
    out: &mut [f32],
    parallelism: gemm::Parallelism,
) {
    assert!(
        x.len() >= n * inputs && w.len() >= outputs * inputs && out.len() >= n * outputs,
        "matrix sizes do not match"
    );
    let stride = |v: usize| isize::try_from(v).expect("matrix dimensions fit isize");
    // `unsafe` because gemm takes raw pointers and strides (its safe wrappers need a matrix
    // crate); this one call is the only unsafe code of the tier.
    // SAFETY: the assertion above guarantees every index gemm reads or writes is in bounds:
    // dst is n × outputs row-major (column stride 1, row stride outputs), lhs is n × inputs
    // row-major, rhs is wᵀ (inputs × outputs) read from w with column stride `inputs` and row
    // stride 1. The slices do not overlap (one is borrowed mutably).
    #[allow(unsafe_code)]
    unsafe {
        gemm::gemm(
            n,
            outputs,
            inputs,
            out.as_mut_ptr(),
            1,
            stride(outputs),
            true,
            x.as_ptr(),
            1,
            stride(inputs),
            w.as_ptr(),
            stride(inputs),
            1,
            1.0f32,
            1.0f32,
            false,
            false,
            false,
            parallelism,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[expect(clippy::float_cmp, reason = "small integers are exact in f32")]
    fn multiplies_by_the_transposed_weights_and_adds() {
        // x = [[1, 2], [3, 4]], w = [[1, 0], [0, 1], [1, 1]] (3 outputs × 2 inputs).
        let x = [1.0, 2.0, 3.0, 4.0];
        let w = [1.0, 0.0, 0.0, 1.0, 1.0, 1.0];
        let mut out = [10.0; 6];
        matmul_transposed_add(&x, 2, 2, &w, 3, &mut out);
        assert_eq!(out, [11.0, 12.0, 13.0, 13.0, 14.0, 17.0]);
        let mut single = [0.0; 6];
        single_threaded(|| matmul_transposed_add(&x, 2, 2, &w, 3, &mut single));
        assert_eq!(single, [1.0, 2.0, 3.0, 3.0, 4.0, 7.0]);
    }
}
