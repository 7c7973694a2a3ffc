//! A subscription's endpoint health as the console shows it: the figures of
//! [`EndpointHealth`] (success rates of the last hundred finished deliveries and of the last
//! day, attempt latency, the last failure, the run of dead deliveries against the pause
//! threshold) and a chart of the last 24 hours, an inline SVG drawn here on the server (no
//! script; its colours are the stylesheet's classes, so the CSP's `style-src 'self'` holds), with
//! a title, a description and the hourly numbers as a table too.

use super::page::when;
use maud::{html, Markup};
use shared::operations::endpoint_health::{EndpointHealth, HourBucket, SuccessRate};

/// `97% (97 of 100)`, or that nothing finished.
pub fn rate_text(r: &SuccessRate) -> Markup {
    html! {
        @if let Some(rate) = r.rate {
            (format!("{:.0}%", rate * 100.0)) " " span class="muted" { "(" (r.delivered) " of " (r.finished) " delivered)" }
        } @else {
            span class="muted" { "no finished delivery" }
        }
    }
}

/// A latency in milliseconds, or a dash.
fn ms(v: Option<u64>) -> String {
    v.map_or_else(|| "—".to_owned(), |v| format!("{v} ms"))
}

/// The last failure: when, how it was classified, the HTTP status and the error.
pub fn last_failure(h: &EndpointHealth) -> Markup {
    html! {
        @if let Some(f) = &h.last_failure {
            (when(Some(f.at))) " " (f.class)
            @if let Some(code) = f.http_status { ", HTTP " (code) }
            @if let Some(e) = &f.error { ": " (e) }
        } @else { "—" }
    }
}

/// The run of dead deliveries against the pause threshold.
pub fn dead_run(h: &EndpointHealth) -> String {
    format!(
        "{} of {} (pauses at {})",
        h.dead_in_a_row, h.pause_threshold, h.pause_threshold
    )
}

/// The health panel of a subscription's page.
pub fn health_panel(h: &EndpointHealth) -> Markup {
    html! {
        section class="panel" id="endpoint-health" aria-labelledby="health-heading" {
            h2 id="health-heading" { "Endpoint health" }
            dl class="facts" {
                dt { "Last 100 finished" } dd data-testid="success-rate" { (rate_text(&h.last_100)) }
                dt { "Last 24 hours" } dd data-testid="success-rate-24h" { (rate_text(&h.last_24h)) }
                dt { "Attempt latency" } dd data-testid="latency" { "p50 " (ms(h.latency_p50_ms)) ", p95 " (ms(h.latency_p95_ms)) " " span class="muted" { "(" (h.latency_attempts) " attempts)" } }
                dt { "Last failure" } dd data-testid="last-failure" { (last_failure(h)) }
                dt { "Dead in a row" } dd data-testid="dead-run" { (dead_run(h)) }
                @if let Some(t) = h.paused_since { dt { "Paused since" } dd data-testid="paused-since" { (when(Some(t))) } }
            }
            @if !h.complete { p class="muted" { "Counted over the newest deliveries read; an endpoint this busy has more." } }
            (hourly_chart(&h.hourly))
        }
    }
}

/// Width and height of the chart's drawing, in its own units.
const W: u32 = 480;
const H: u32 = 120;
/// Room below the bars for the axis labels.
const AXIS: u32 = 16;

/// The last 24 hours, one column per hour (oldest left): delivered in green under failed in
/// red, scaled to the busiest hour; an hour without a finished delivery is a thin grey line.
pub fn hourly_chart(buckets: &[HourBucket]) -> Markup {
    let delivered: u32 = buckets.iter().map(|b| b.delivered).sum();
    let failed: u32 = buckets.iter().map(|b| b.failed).sum();
    let busiest = buckets
        .iter()
        .map(|b| b.delivered + b.failed)
        .max()
        .unwrap_or(0)
        .max(1);
    let n = buckets.len().max(1) as u32;
    let slot = W / n;
    let bar = slot.saturating_sub(2).max(1);
    let plot = H - AXIS;
    let summary = format!(
        "Deliveries finished per hour over the last {} hours: {delivered} delivered, {failed} failed or dead; the busiest hour had {busiest}.",
        buckets.len()
    );
    html! {
        figure class="chart-figure" {
            svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox=(format!("0 0 {W} {H}"))
                role="img" aria-labelledby="chart-title chart-desc" data-testid="health-chart" {
                title id="chart-title" { "Deliveries per hour, last 24 hours" }
                desc id="chart-desc" { (summary) }
                @for (i, b) in buckets.iter().enumerate() {
                    @let x = i as u32 * slot + 1;
                    @let ok_h = b.delivered * plot / busiest;
                    @let bad_h = b.failed * plot / busiest;
                    @if b.delivered + b.failed == 0 {
                        rect class="bar-none" x=(x) y=(plot - 1) width=(bar) height="1" {}
                    } @else {
                        rect class="bar-ok" x=(x) y=(plot - ok_h) width=(bar) height=(ok_h) data-hour=(b.start.to_rfc3339()) {}
                        rect class="bar-bad" x=(x) y=(plot - ok_h - bad_h) width=(bar) height=(bad_h) {}
                    }
                }
                line class="axis" x1="0" y1=(plot) x2=(W) y2=(plot) {}
                text x="0" y=(H - 3) { "24 h ago" }
                text x=(W) y=(H - 3) text-anchor="end" { "now" }
            }
            figcaption {
                ul class="legend" {
                    li { span class="key ok" {} "delivered: " (delivered) }
                    li { span class="key bad" {} "failed or dead: " (failed) }
                }
                details {
                    summary { "The hourly numbers" }
                    div class="table-wrap" {
                        table id="health-hours" {
                            thead { tr { th scope="col" { "Hour from" } th scope="col" { "Delivered" } th scope="col" { "Failed or dead" } } }
                            tbody {
                                @for b in buckets {
                                    tr { td { (when(Some(b.start))) } td { (b.delivered) } td { (b.failed) } }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shared::domain::time::Timestamp;

    fn bucket(i: i64, delivered: u32, failed: u32) -> HourBucket {
        HourBucket {
            start: Timestamp(i * 3_600_000),
            delivered,
            failed,
        }
    }

    #[test]
    fn the_chart_scales_to_the_busiest_hour_and_says_its_numbers_in_text() {
        let buckets: Vec<HourBucket> = (0..24)
            .map(|i| match i {
                3 => bucket(i, 10, 0),
                5 => bucket(i, 2, 3),
                _ => bucket(i, 0, 0),
            })
            .collect();
        let svg = hourly_chart(&buckets).into_string();
        // The busiest hour's bar fills the plot; the others scale to it.
        assert!(svg.contains(&format!("height=\"{}\"", H - AXIS)), "{svg}");
        assert!(svg.contains("height=\"20\""), "2 of 10: {svg}");
        assert!(svg.contains("height=\"31\""), "3 of 10: {svg}");
        assert_eq!(svg.matches("class=\"bar-none\"").count(), 22);
        assert!(svg.contains("12 delivered, 3 failed or dead; the busiest hour had 10."));
        // Every element is closed (inline SVG in HTML), none is styled inline.
        assert_eq!(svg.matches("<rect").count(), svg.matches("</rect>").count());
        assert!(!svg.contains("style="));
        assert!(svg.contains("role=\"img\"") && svg.contains("<title id=\"chart-title\">"));
    }
}
