//! Text that fits: counts with the right plural, long values shortened in the middle, and
//! block hashes shown short with their full value on hover and a copy button.

use leptos::prelude::*;

/// `n` and the noun, singular for exactly one: `count(1, "block", "blocks")` = `"1 block"`.
pub fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `s` shortened to at most `max` characters by an ellipsis in the middle (the start and end
/// of a hash are what people compare): `mid_ellipsis("12345678901234567890", 13)` =
/// `"123456…567890"`. Shorter strings come back unchanged.
pub fn mid_ellipsis(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max || max < 3 {
        return s.to_string();
    }
    let keep = max - 1;
    let head = keep.div_ceil(2);
    let tail = keep - head;
    let start: String = s.chars().take(head).collect();
    let end: String = s.chars().skip(n - tail).collect();
    format!("{start}…{end}")
}

/// Characters a hash is shortened to in cards and lists (a 20-digit `u64` becomes 6 + … + 6).
pub const HASH_CHARS: usize = 13;

/// A block hash (or any long value) that never crosses its container: shortened in the
/// middle, the full value as its `title` (hover) and a copy button next to it. `also` adds
/// another form of the value to the hover text (the hex form of a decimal hash).
pub fn hash_text(value: String, also: Option<String>) -> impl IntoView {
    let short = mid_ellipsis(&value, HASH_CHARS);
    let title = match &also {
        Some(a) if *a != value => format!("{value} ({a})"),
        _ => value.clone(),
    };
    let copied = RwSignal::new(false);
    let full = value.clone();
    let copy = move |e: leptos::ev::MouseEvent| {
        e.stop_propagation();
        let _ = window().navigator().clipboard().write_text(&full);
        copied.set(true);
        crate::load::after(1200, move || copied.set(false));
    };
    view! {
        <span class="hash-text">
            <span class="mono hash" title=title data-full=value.clone()>{short}</span>
            <button class="copy" aria-label=format!("Copy hash {value}") title=move || if copied.get() { "Copied" } else { "Copy the full value" }
                class:copied=copied on:click=copy>
                // Two overlapping sheets drawn by CSS (no font needs a copy glyph); a tick once copied.
                <span class="copy-icon" aria-hidden="true"></span>
            </button>
        </span>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plurals() {
        assert_eq!(count(0, "block", "blocks"), "0 blocks");
        assert_eq!(count(1, "block", "blocks"), "1 block");
        assert_eq!(count(2, "lane", "lanes"), "2 lanes");
        assert_eq!(count(1, "inversion", "inversions"), "1 inversion");
    }

    #[test]
    fn middle_ellipsis() {
        assert_eq!(mid_ellipsis("12345678901234567890", 13), "123456…567890");
        assert_eq!(mid_ellipsis("12345678901234567890", 13).chars().count(), 13);
        assert_eq!(mid_ellipsis("1234567890123", 13), "1234567890123");
        assert_eq!(mid_ellipsis("0xabcdef0123456789", 9), "0xab…6789");
        assert_eq!(mid_ellipsis("ab", 1), "ab");
    }
}
