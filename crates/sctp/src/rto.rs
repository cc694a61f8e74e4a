//! Retransmission timeout estimation (RFC 9260 §6.3.1).

use std::time::Duration;

/// SRTT/RTTVAR with α = 1/8, β = 1/4, clamped to [RTO.Min, RTO.Max].
#[derive(Clone, Debug)]
pub(crate) struct RtoEstimator {
    srtt: Option<Duration>,
    rttvar: Duration,
    rto: Duration,
    min: Duration,
    max: Duration,
}

impl RtoEstimator {
    pub(crate) fn new(initial: Duration, min: Duration, max: Duration) -> Self {
        let max = max.max(min);
        RtoEstimator { srtt: None, rttvar: Duration::ZERO, rto: initial.clamp(min, max), min, max }
    }

    /// Feeds one RTT measurement R (C2 and C3 of §6.3.1).
    pub(crate) fn sample(&mut self, r: Duration) {
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = r / 2;
            }
            Some(srtt) => {
                let diff = srtt.abs_diff(r);
                self.rttvar = self.rttvar * 3 / 4 + diff / 4;
                self.srtt = Some(srtt * 7 / 8 + r / 8);
            }
        }
        let srtt = self.srtt.unwrap_or(r);
        // G (clock granularity) is zero here: time is passed in at nanosecond resolution.
        self.rto = srtt.saturating_add(self.rttvar.saturating_mul(4)).clamp(self.min, self.max);
    }

    /// Doubles the RTO after a timer expiry (E2 of §6.3.3).
    pub(crate) fn back_off(&mut self) {
        self.rto = self.rto.saturating_mul(2).min(self.max);
    }

    pub(crate) fn rto(&self) -> Duration {
        self.rto
    }

    pub(crate) fn srtt(&self) -> Option<Duration> {
        self.srtt
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_rfc_9260_formulas() {
        let ms = Duration::from_millis;
        let mut e = RtoEstimator::new(ms(1000), ms(100), ms(60_000));
        assert_eq!(e.rto(), ms(1000));
        e.sample(ms(200));
        // SRTT = 200, RTTVAR = 100, RTO = 200 + 400
        assert_eq!(e.rto(), ms(600));
        e.sample(ms(200));
        // RTTVAR = 75, SRTT = 200, RTO = 500
        assert_eq!(e.rto(), ms(500));
        e.back_off();
        assert_eq!(e.rto(), ms(1000));
        for _ in 0..20 {
            e.back_off();
        }
        assert_eq!(e.rto(), ms(60_000));
        let mut low = RtoEstimator::new(ms(1000), ms(100), ms(60_000));
        low.sample(ms(1));
        assert_eq!(low.rto(), ms(100), "clamped to RTO.Min");
    }
}
