//! Which started prompts get a step's prefill budget first.
//!
//! In arrival order, a short prompt that starts while long ones are being
//! read waits for all of them: with four coding-agent sessions on 2 CPU
//! cores, a session's next turn (a reply and a tool result past thousands
//! of cached tokens) waited 94-104 s behind the other sessions' cold
//! prompts, as long as a cold prompt took. Shortest first would end that
//! and starve a long prompt under a stream of short turns. Weighing a
//! prompt's wait against its length in wall time did not help either: by
//! the time a session's next turn arrives, the cold prompts have waited
//! as long as their own length.
//!
//! So, as in the fair sojourn protocol (Friedman and Henderson, 2003),
//! the scheduler keeps beside the real reading the one that sharing the
//! prompt work equally among the prompts being read would do (processor
//! sharing, counted in prompt tokens), and reads first the prompt that
//! would end first there. Within that bound short prompts go first: a
//! session's next turn passes cold prompts that would still be far from
//! read under equal shares, and a long prompt passed by short turns moves
//! up as its share of the work read adds up, so it is read about when
//! equal shares would have read it. A prompt leaves the shared reading
//! when either reading ends it, so a session whose turn was read claims
//! no share until its next turn starts.
//!
//! Counted in tokens, the order needs no estimate of the pace.

/// The equal-share reading of the prompts being read.
#[derive(Debug, Default)]
pub struct PrefillOrder {
    /// Prompt tokens each prompt in the equal-share reading has received
    /// since that reading began (its virtual time).
    shared: f64,
}

impl PrefillOrder {
    /// Where a prompt starting now with `tokens` to compute would end with
    /// the work shared equally: its place in the order, earliest first.
    pub fn end(&self, tokens: usize) -> f64 {
        self.shared + tokens as f64
    }

    /// A step read `tokens` prompt tokens while the prompts ending at
    /// `ends` were being read: the equal-share reading gives the same work
    /// out equally among those it has not ended yet, each leaving it once
    /// its share reaches its end (its share then goes to the others).
    pub fn read(&mut self, tokens: usize, ends: impl IntoIterator<Item = f64>) {
        let mut ends: Vec<f64> = ends.into_iter().filter(|&e| e > self.shared).collect();
        ends.sort_by(f64::total_cmp);
        let mut left = tokens as f64;
        for (i, &next) in ends.iter().enumerate() {
            let sharing = (ends.len() - i) as f64;
            let to_next = (next - self.shared) * sharing;
            if to_next > left {
                self.shared += left / sharing;
                return;
            }
            left -= to_next;
            self.shared = next;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_prompt_passes_a_long_one_far_from_read() {
        let mut order = PrefillOrder::default();
        let long = order.end(8_000);
        order.read(1_000, [long]);
        assert!(order.end(500) < long);
    }

    /// The agent sessions' case: four cold prompts start together and one
    /// is read whole; its session's next turn passes the three others,
    /// which have waited that long but are far from read under equal
    /// shares.
    #[test]
    fn a_cached_turn_passes_cold_prompts_that_waited_for_the_first() {
        let mut order = PrefillOrder::default();
        let cold: Vec<f64> = (0..4).map(|_| order.end(25_000)).collect();
        order.read(25_000, cold.iter().copied());
        let turn = order.end(1_400);
        assert!(cold.iter().all(|&c| turn < c), "{turn} vs {cold:?}");
    }

    /// One session's turns, read one after another, pass a long prompt
    /// only until its equal share of the work read since it started adds
    /// up to its length: it is read before 2 x 8,000 tokens have gone by
    /// (two prompts at a time), not never, and not first.
    #[test]
    fn a_long_prompt_passed_by_short_turns_is_read_within_its_equal_share() {
        let mut order = PrefillOrder::default();
        let long = order.end(8_000);
        let mut read = 0;
        loop {
            let turn = order.end(500);
            if turn > long {
                break;
            }
            order.read(500, [long, turn]);
            read += 500;
            assert!(read <= 16_000, "the long prompt waited {read} tokens");
        }
        assert!(
            read >= 8_000,
            "short turns passed it for {read} tokens only"
        );
    }

    #[test]
    fn a_prompt_the_shared_reading_ended_gives_its_share_to_the_others() {
        let mut order = PrefillOrder::default();
        let (short, long) = (order.end(100), order.end(1_000));
        // 200 tokens end the short one under equal shares (100 each); the
        // other 200 go to the long one alone.
        order.read(400, [short, long]);
        assert_eq!(order.shared, 300.0);
        // Ended there, the short one shares no more of what is read.
        order.read(100, [short, long]);
        assert_eq!(order.shared, 400.0);
    }

    #[test]
    fn with_nothing_left_to_share_the_reading_stops() {
        let mut order = PrefillOrder::default();
        let one = order.end(100);
        order.read(1_000, [one]);
        assert_eq!(order.shared, 100.0);
        order.read(1_000, []);
        assert_eq!(order.end(10), 110.0);
    }
}
