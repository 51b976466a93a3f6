//! Bar charts as inline SVG, drawn on the server: no script and nothing from another host, so
//! they show without JavaScript under the console's Content-Security-Policy. Each bar has its
//! figure as a `<title>` (shown on hover); the page gives the same figures in a table.

use maud::{Markup, html};

/// The drawing's size, in SVG units (the page scales it).
const WIDTH: f64 = 360.0;
const HEIGHT: f64 = 64.0;
/// Room above the bars for the largest figure.
const HEADROOM: f64 = 14.0;

/// One bar: where it is (`key`, a data attribute the tests find it by), what it says on hover,
/// and its height.
pub(super) struct Bar {
    pub key: u64,
    pub label: String,
    pub value: f64,
}

/// A chart of `bars`, left to right, headed `name`; `largest` says the largest figure in words.
pub(super) fn bars(name: &str, bars: &[Bar], largest: &str) -> Markup {
    let most = bars.iter().map(|bar| bar.value).fold(0.0, f64::max);
    let slot = WIDTH / bars.len().max(1) as f64;
    html! {
        figure.chart {
            figcaption { b { (name) } " (most " (largest) ")" }
            svg role="img" viewBox={ "0 0 " (WIDTH) " " (HEIGHT) }
                aria-label=(name) {
                line x1="0" y1=(HEIGHT - 0.5) x2=(WIDTH) y2=(HEIGHT - 0.5) stroke="#bbb" {}
                @for (index, bar) in bars.iter().enumerate() {
                    @let height = tenths(if most > 0.0 { bar.value / most * (HEIGHT - HEADROOM) } else { 0.0 });
                    @let x = tenths(index as f64 * slot);
                    // The whole slot answers the hover, however short its bar.
                    g data-key=(bar.key) {
                        title { (bar.label) }
                        rect x=(x) y="0" width=(tenths(slot)) height=(HEIGHT) fill="transparent" {}
                        rect x=(tenths(x + slot * 0.1)) y=(tenths(HEIGHT - height)) width=(tenths(slot * 0.8)) height=(height) fill="#3b6ea5" {}
                    }
                }
            }
        }
    }
}

/// `value` to a tenth of a unit: finer is not seen, and the page is shorter.
fn tenths(value: f64) -> f64 {
    (value * 10.0).round() / 10.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_bar_is_as_tall_as_its_share_and_says_its_figure_escaped() {
        let drawn = bars(
            "pushed <b>",
            &[
                Bar {
                    key: 7,
                    label: "12:00: 2 <pushed>".into(),
                    value: 2.0,
                },
                Bar {
                    key: 8,
                    label: "12:01: 1".into(),
                    value: 1.0,
                },
            ],
            "2",
        )
        .into_string();
        assert!(
            drawn.contains("<title>12:00: 2 &lt;pushed&gt;</title>"),
            "{drawn}"
        );
        assert!(drawn.contains("pushed &lt;b&gt;"), "{drawn}");
        let full = HEIGHT - HEADROOM;
        assert!(drawn.contains(&format!("height=\"{full}\"")), "{drawn}");
        assert!(
            drawn.contains(&format!("height=\"{}\"", full / 2.0)),
            "{drawn}"
        );
        assert!(drawn.contains("data-key=\"8\""), "{drawn}");
        assert!(!drawn.contains("<script"), "{drawn}");
    }
}
