//! Dice for the suites that deal blows at random (chaos, the lossy
//! network): small, deterministic, replayable from a printed seed.

use std::time::Duration;

/// A small deterministic generator (xorshift64*) for the suites that deal
/// blows at random: no crate for a dice. Seed it with [`seed_from`].
pub struct Dice(pub u64);

impl Dice {
    pub fn roll(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545F4914F6CDD1D)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.roll() % n
    }

    /// A duration from `lo` (included) to `hi` (excluded) milliseconds.
    pub fn millis(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.below(hi - lo))
    }
}

/// The seed in the variable `name` (to replay a run), else one from the
/// clock; never 0, which xorshift would keep.
pub fn seed_from(name: &str) -> u64 {
    std::env::var(name).ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
    }) | 1
}
