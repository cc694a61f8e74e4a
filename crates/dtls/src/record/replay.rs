//! The anti-replay window (RFC 6347 §4.1.2.6).

/// The 64-record sliding anti-replay window of RFC 6347 §4.1.2.6.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplayWindow {
    /// Highest sequence number accepted, plus one (0: none yet).
    next: u64,
    /// Bit i set: `next - 1 - i` was accepted.
    bits: u64,
}

impl ReplayWindow {
    /// Whether `seq` is new and inside the window. Check before decrypting, mark after.
    pub fn is_fresh(&self, seq: u64) -> bool {
        if seq >= self.next {
            return true;
        }
        let age = self.next - 1 - seq;
        age < 64 && self.bits & (1 << age) == 0
    }

    /// Records `seq` as received (after it authenticated).
    pub fn mark(&mut self, seq: u64) {
        if seq >= self.next {
            let shift = seq + 1 - self.next;
            self.bits = if shift >= 64 { 0 } else { self.bits << shift };
            self.bits |= 1;
            self.next = seq + 1;
        } else {
            let age = self.next - 1 - seq;
            if age < 64 {
                self.bits |= 1 << age;
            }
        }
    }

    /// Highest sequence number accepted so far (RFC 9146 §6: only a newer record may move a session).
    pub fn highest(&self) -> Option<u64> {
        self.next.checked_sub(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replay_window_slides() {
        let mut w = ReplayWindow::default();
        assert!(w.is_fresh(0));
        w.mark(0);
        assert!(!w.is_fresh(0));
        w.mark(5);
        assert!(w.is_fresh(3));
        w.mark(3);
        assert!(!w.is_fresh(3) && !w.is_fresh(5) && w.is_fresh(4));
        w.mark(100);
        assert!(!w.is_fresh(36), "outside the window");
        assert!(w.is_fresh(37) && !w.is_fresh(100) && w.is_fresh(101));
        w.mark(1000);
        assert!(!w.is_fresh(100) && w.is_fresh(999));
        assert_eq!(w.highest(), Some(1000));
    }
}
