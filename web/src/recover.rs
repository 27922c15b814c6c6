//! Bad input keeps what it can. When a capture breaks part-way (a msgpack stream or a JSON
//! Lines file cut mid-batch, or one corrupt record), the core's resumable reader
//! (`wire::stream::Decoder`) has already returned every complete record before the break, knows
//! how many bytes they span ([`Decoder::position`](kvscope_core::wire::stream::Decoder::position))
//! and locates the error (byte offset or line). The page shows the error and offers to open
//! those leading batches, saying how many and where the input broke.

use std::sync::Arc;

use kvscope_core::wire::{Location, WireError};
use leptos::prelude::*;

use crate::permalink::TraceOrigin;
use crate::text::count;
use crate::AppState;

/// An input that broke after some complete batches.
#[derive(Clone, Debug, PartialEq)]
pub struct Broken {
    /// The reader's located error.
    pub error: WireError,
    /// Complete batches before the break.
    pub batches: usize,
    /// Bytes spanned by the complete records before the break (the prefix to open).
    pub complete_bytes: usize,
}

/// What the page offers after a broken load: the leading complete batches of the input.
#[derive(Clone, Debug)]
pub struct Recovery {
    /// Display name of the broken input.
    pub name: String,
    /// Complete batches before the break.
    pub batches: usize,
    /// Where the input broke.
    pub at: Location,
    /// The input's complete leading records (exactly `complete_bytes` of it).
    pub prefix: Arc<Vec<u8>>,
}

impl Recovery {
    /// The offer for `broken` over `bytes` (the whole input), `None` when no batch is complete.
    pub fn offer(name: &str, broken: &Broken, mut bytes: Vec<u8>) -> Option<Recovery> {
        if broken.batches == 0 || broken.complete_bytes > bytes.len() {
            return None;
        }
        bytes.truncate(broken.complete_bytes);
        Some(Recovery {
            name: name.to_owned(),
            batches: broken.batches,
            at: broken.error.location,
            prefix: Arc::new(bytes),
        })
    }

    /// The sentence saying what can be opened: "The input broke at byte offset 1234. The 5
    /// complete batches before it can be opened."
    pub fn sentence(&self) -> String {
        let before = match self.batches {
            1 => "The 1 complete batch before it can be opened.".to_string(),
            n => format!("The {n} complete batches before it can be opened."),
        };
        format!("The input broke at {}. {before}", self.at)
    }

    /// The button's label: "Open 5 complete batches".
    pub fn button(&self) -> String {
        format!(
            "Open {}",
            count(self.batches, "complete batch", "complete batches")
        )
    }

    /// The name the opened prefix is shown under.
    pub fn prefix_name(&self) -> String {
        format!(
            "{} (first {})",
            self.name,
            count(self.batches, "batch", "batches")
        )
    }
}

/// The offer under a load error: the sentence and the button that opens the leading batches.
#[component]
pub fn RecoverOffer() -> impl IntoView {
    let st = expect_context::<AppState>();
    move || {
        st.recovery.get().map(|r| {
            let sentence = r.sentence();
            let label = r.button();
            let open = move |_| {
                if let Some(r) = st.recovery.get_untracked() {
                    let bytes = r.prefix.as_ref().clone();
                    crate::load::load_bytes(st, r.prefix_name(), bytes, TraceOrigin::Local, None);
                }
            };
            view! {
                <span class="recover" data-testid="recover">
                    {sentence}" "
                    <button class="btn primary" on:click=open>{label}</button>
                </span>
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn broken(batches: usize, complete_bytes: usize, at: Location) -> Broken {
        Broken {
            error: WireError {
                location: at,
                message: "truncated".into(),
            },
            batches,
            complete_bytes,
        }
    }

    #[test]
    fn offers_the_complete_prefix_and_says_where_it_broke() {
        let b = broken(3, 4, Location::Byte(7));
        let r = Recovery::offer("cap.msgpack", &b, b"abcdefghij".to_vec()).expect("an offer");
        assert_eq!(r.prefix.as_slice(), b"abcd");
        assert_eq!(
            r.sentence(),
            "The input broke at byte offset 7. The 3 complete batches before it can be opened."
        );
        assert_eq!(r.button(), "Open 3 complete batches");
        assert_eq!(r.prefix_name(), "cap.msgpack (first 3 batches)");
        let one = broken(
            1,
            2,
            Location::Line {
                line: 3,
                column: Some(9),
            },
        );
        let r = Recovery::offer("t.jsonl", &one, b"abc".to_vec()).expect("an offer");
        assert_eq!(
            r.sentence(),
            "The input broke at line 3, column 9. The 1 complete batch before it can be opened."
        );
        assert_eq!(r.button(), "Open 1 complete batch");
    }

    #[test]
    fn nothing_to_offer_without_a_complete_batch() {
        assert!(Recovery::offer("x", &broken(0, 0, Location::Byte(0)), vec![1]).is_none());
        assert!(
            Recovery::offer("x", &broken(2, 9, Location::Byte(9)), vec![1]).is_none(),
            "a prefix longer than the input is not offered"
        );
    }
}
