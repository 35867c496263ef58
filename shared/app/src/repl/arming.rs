//! When keys may answer the front question. A question that just opened, or just came to
//! the front (the one before it was answered, withdrawn or replaced, or Tab), is not yet
//! *armed*: the person may be typing a sentence at the prompt, or pressing `y` for the
//! question that was there a moment ago, and a letter of that must not approve a call
//! (the `a` of "a plan" would save a rule). It arms [`ARM_DELAY`] after it came to the
//! front; a key that arrives before then is dropped (and counted, so the block can say
//! so), and one that arrives within [`TYPING_GAP`] of the key before it — someone still
//! typing — starts the delay again. The pinned block shows the answer keys only once
//! the question is armed.
//!
//! Pure state over explicit instants, so the rules are tested without a terminal.

use std::time::{Duration, Instant};

/// How long a question waits at the front before keys answer it: longer than a reaction
/// to a line appearing, short enough not to be noticed when reading the question.
pub(super) const ARM_DELAY: Duration = Duration::from_millis(700);

/// Keys closer together than this are typing: one dropped while the question is not
/// armed starts [`ARM_DELAY`] again, so a sentence typed on never answers a question.
pub(super) const TYPING_GAP: Duration = Duration::from_millis(300);

/// A front question withdrawn this recently, then replaced by another, is marked as
/// changed (a newer question from the same asker, or the next asker's moving up).
const CHANGED_WINDOW: Duration = Duration::from_secs(3);

/// The front question's arming, keyed by the question's serial number.
#[derive(Default)]
pub(super) struct Arming {
    front: Option<u64>,
    armed_at: Option<Instant>,
    last_key: Option<Instant>,
    /// Keys dropped since the front question came to the front.
    pub(super) dropped: usize,
    /// The front question took the place of one that was withdrawn, not answered.
    pub(super) changed: bool,
    /// When the front question was last withdrawn and none replaced it.
    lost_at: Option<Instant>,
}

impl Arming {
    /// The front question is now `front` (`by_user`: the person's answer or Tab put it
    /// there). A different question starts the delay.
    pub(super) fn front_is(&mut self, front: Option<u64>, now: Instant, by_user: bool) {
        if front == self.front {
            return;
        }
        let lost_recently = self
            .lost_at
            .is_some_and(|at| now.saturating_duration_since(at) < CHANGED_WINDOW);
        match front {
            Some(_) => {
                self.changed = !by_user && (self.front.is_some() || lost_recently);
                self.armed_at = Some(now + ARM_DELAY);
                self.dropped = 0;
                self.lost_at = None;
            }
            None => {
                self.changed = false;
                self.armed_at = None;
                self.lost_at = (!by_user && self.front.is_some()).then_some(now);
            }
        }
        self.front = front;
    }

    /// Focus came back to the questions (from the prompt): the delay starts again.
    pub(super) fn rearm(&mut self, now: Instant) {
        if self.front.is_some() {
            self.armed_at = Some(now + ARM_DELAY);
        }
    }

    /// A key at `now`: whether it may answer the front question (always, when none is
    /// open). A key that may not is dropped and counted.
    pub(super) fn key(&mut self, now: Instant) -> bool {
        let typing = self
            .last_key
            .is_some_and(|t| now.saturating_duration_since(t) < TYPING_GAP);
        self.last_key = Some(now);
        let Some(armed_at) = self.armed_at else {
            return true;
        };
        if now >= armed_at {
            return true;
        }
        self.dropped += 1;
        if typing {
            self.armed_at = Some(armed_at.max(now + ARM_DELAY));
        }
        false
    }

    /// Whether keys answer the front question at `now`.
    pub(super) fn armed(&self, now: Instant) -> bool {
        self.armed_at.is_none_or(|at| now >= at)
    }

    /// When the front question arms, while it is not armed yet.
    pub(super) fn arms_at(&self, now: Instant) -> Option<Instant> {
        self.armed_at.filter(|at| now < *at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_key_right_after_a_question_opens_is_dropped_and_one_after_the_delay_answers() {
        let t0 = Instant::now();
        let mut arming = Arming::default();
        assert!(arming.key(t0), "no question: keys are the prompt's");
        arming.front_is(Some(1), t0 + ms(1000), false);
        assert!(!arming.armed(t0 + ms(1100)));
        assert!(!arming.key(t0 + ms(1200)));
        assert_eq!(arming.dropped, 1);
        assert!(!arming.changed);
        assert!(arming.key(t0 + ms(1000) + ARM_DELAY));
    }

    #[test]
    fn typing_on_keeps_the_question_unarmed_until_a_pause() {
        // "please try again" typed at 100 ms a key, the question opening mid-word: no
        // letter of it answers, however long the sentence.
        let t0 = Instant::now();
        let mut arming = Arming::default();
        arming.key(t0);
        arming.front_is(Some(1), t0 + ms(50), false);
        let mut at = t0;
        for _ in 0..30 {
            at += ms(100);
            assert!(!arming.key(at), "a typed letter answered at {at:?}");
        }
        assert_eq!(arming.dropped, 30);
        // A pause: the question arms a delay after the last key.
        assert!(!arming.armed(at + ARM_DELAY - ms(1)));
        assert!(arming.armed(at + ARM_DELAY));
        assert!(arming.key(at + ARM_DELAY + ms(10)));
    }

    #[test]
    fn a_new_front_question_arms_again_and_is_marked_changed_unless_the_person_moved_it() {
        let t0 = Instant::now();
        let mut arming = Arming::default();
        arming.front_is(Some(1), t0, false);
        assert!(arming.key(t0 + ms(800)));
        // The front question withdrawn, the next asker's moves up: a `y` meant for the
        // one before is dropped, and the block says the question changed.
        arming.front_is(Some(2), t0 + ms(900), false);
        assert!(arming.changed);
        assert!(!arming.key(t0 + ms(950)));
        // Withdrawn, then a newer question from the same asker opens at the front.
        arming.front_is(None, t0 + ms(2000), false);
        arming.front_is(Some(3), t0 + ms(2100), false);
        assert!(arming.changed);
        assert!(!arming.key(t0 + ms(2200)));
        // The person's own answer brings the next one: armed again, not "changed".
        arming.front_is(Some(4), t0 + ms(5000), true);
        assert!(!arming.changed);
        assert!(!arming.armed(t0 + ms(5100)));
        assert_eq!(
            arming.arms_at(t0 + ms(5100)),
            Some(t0 + ms(5000) + ARM_DELAY)
        );
    }
}
