//! The memory plan as a PNG: one horizontal bar per rung of the fit ladder, stacked by component,
//! the budget as a vertical line, the chosen rung marked.

use std::path::Path;

use plotters::prelude::*;

use crate::Result;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::canvas::{self, DrawResult, FAMILY};
use crate::error::invalid;

/// Width of the chart, in pixels.
pub const PLAN_WIDTH: u32 = 1100;
/// Width of the legend panel on the right, in pixels.
const LEGEND_WIDTH: u32 = 250;
/// Height of one rung's row, in pixels.
const ROW: u32 = 46;
/// Height of a legend line, in pixels.
const LEGEND_LINE: i32 = 21;
/// The budget line.
const BUDGET: RGBColor = RGBColor(0xd6, 0x27, 0x28);
/// The budget is drawn to scale while it is at most this many times the largest peak; beyond, the
/// bars would shrink to slivers, so it is named at the right edge instead.
const BUDGET_ON_SCALE_UP_TO: f64 = 1.6;

/// Component colours, one per component in order, chosen for headroom's
/// `Components::at_peak` order (runtime, weights, gradients, optimizer, averages, warmup, cache,
/// input, trunk, cut, activations, backward, loss, eval) so that no two share a colour and none is
/// the budget's red; more components cycle.
const COLOURS: [RGBColor; 14] = [
    RGBColor(0x7f, 0x7f, 0x7f),
    RGBColor(0xc7, 0xc7, 0xc7),
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xae, 0xc7, 0xe8),
    RGBColor(0x9e, 0xda, 0xe5),
    RGBColor(0xbc, 0xbd, 0x22),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xff, 0xbb, 0x78),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x98, 0xdf, 0x8a),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x17, 0xbe, 0xcf),
];

/// One rung of the fit ladder, as drawn.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanRung {
    /// What the rung changed (`start`, `batch 4`, `checkpoint`, …).
    pub label: String,
    /// `(component, MiB)` making up the estimated peak, in stacking order; every rung names the
    /// same components in the same order (a component a rung lacks is 0).
    pub components: Vec<(String, f64)>,
}

/// A memory plan, as drawn by [`write_plan_chart`].
#[derive(Debug, Clone, PartialEq)]
pub struct PlanChart {
    /// The caption (model and device).
    pub title: String,
    /// The memory available to training, MiB.
    pub budget_mib: f64,
    /// The rungs in ladder order.
    pub rungs: Vec<PlanRung>,
    /// The index of the chosen rung (the first that fits), if any.
    pub chosen: Option<usize>,
}

/// Draws `plan` to `path` (PNG or JPEG by the extension, written atomically): a horizontal bar per
/// rung, top to bottom in ladder order, its estimated peak stacked by component with each total
/// printed in MiB; the axis fits the bars (from 0); the budget as a red line, labelled (named at the
/// right edge instead when it is far beyond every bar); the chosen rung outlined. A legend on the
/// right names the colours of the components that occur, the budget, and the outline
/// ("chosen: the first rung that fits", or that none fits).
///
/// Errors: no rungs, a chosen index past the rungs, or a negative or non-finite size, before
/// anything is written; a file that cannot be drawn or written.
pub fn write_plan_chart(path: &Path, plan: &PlanChart) -> Result<()> {
    check(plan)?;
    let legend_lines = components(plan).len() as u32 + 4;
    let height = (130 + ROW * plan.rungs.len() as u32).max(90 + legend_lines * LEGEND_LINE as u32);
    canvas::save(path, || canvas::draw(PLAN_WIDTH, height, |root| render(root, plan)))
}

fn check(plan: &PlanChart) -> Result<()> {
    if plan.rungs.is_empty() {
        return Err(invalid("plan chart", "no rungs to draw"));
    }
    if let Some(chosen) = plan.chosen.filter(|&c| c >= plan.rungs.len()) {
        return Err(invalid(
            "plan chart",
            format!("chosen rung {chosen}, but only {} rungs", plan.rungs.len()),
        ));
    }
    if !(plan.budget_mib.is_finite() && plan.budget_mib >= 0.0) {
        return Err(invalid("plan chart", format!("budget {} MiB is not a size", plan.budget_mib)));
    }
    for rung in &plan.rungs {
        if let Some((name, value)) = rung.components.iter().find(|(_, v)| !(v.is_finite() && *v >= 0.0)) {
            return Err(invalid(
                format!("plan chart, rung `{}`", rung.label),
                format!("component `{name}` is {value} MiB"),
            ));
        }
    }
    Ok(())
}

/// The estimated peak of `rung`, MiB.
fn peak(rung: &PlanRung) -> f64 {
    rung.components.iter().map(|(_, v)| v).sum()
}

/// `(index, name)` of the components that are above 0 in some rung, by position in the first
/// rung that names them; the index picks the colour, so a colour means the same in every chart.
fn components(plan: &PlanChart) -> Vec<(usize, &str)> {
    let longest = plan.rungs.iter().max_by_key(|r| r.components.len()).map_or(&[][..], |r| &r.components[..]);
    longest
        .iter()
        .enumerate()
        .filter(|&(k, _)| plan.rungs.iter().any(|r| r.components.get(k).is_some_and(|(_, v)| *v > 0.0)))
        .map(|(k, (name, _))| (k, name.as_str()))
        .collect()
}

/// The right end of the axis and whether the budget is on it.
pub(crate) fn x_end(plan: &PlanChart) -> (f64, bool) {
    let highest = plan.rungs.iter().map(peak).fold(0.0, f64::max);
    let on_scale = plan.budget_mib <= highest * BUDGET_ON_SCALE_UP_TO || highest == 0.0;
    let end = if on_scale { highest.max(plan.budget_mib) } else { highest };
    // Room for the printed totals right of the longest bar.
    ((end * 1.18).max(1.0), on_scale)
}

fn render(root: &canvas::Area, plan: &PlanChart) -> DrawResult {
    let (width, _) = root.dim_in_pixel();
    let (chart_area, legend_area) = root.split_horizontally(width - LEGEND_WIDTH);
    let n = plan.rungs.len();
    let (end, budget_on_scale) = x_end(plan);
    // One spare half-row on top holds the budget's label.
    let mut ctx = ChartBuilder::on(&chart_area)
        .caption(&plan.title, (FAMILY, 22))
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(130)
        .build_cartesian_2d(0f64..end, -0.5f64..(n as f64))?;
    let label = |y: &f64| {
        let i = y.round();
        if (y - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < n {
            plan.rungs[n - 1 - i as usize].label.clone()
        } else {
            String::new()
        }
    };
    ctx.configure_mesh()
        .x_desc("estimated peak, MiB")
        .x_labels(10)
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_labels(n * 2 + 3)
        .y_label_formatter(&label)
        .label_style((FAMILY, 14))
        .axis_desc_style((FAMILY, 15))
        .disable_y_mesh()
        .bold_line_style(RGBColor(220, 220, 220))
        .light_line_style(RGBColor(245, 245, 245))
        .draw()?;
    let total_style = TextStyle::from((FAMILY, 14).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
    for (i, rung) in plan.rungs.iter().enumerate() {
        let y = (n - 1 - i) as f64;
        let mut start = 0.0;
        for (k, (_, value)) in rung.components.iter().enumerate() {
            let colour = COLOURS[k % COLOURS.len()];
            ctx.draw_series([Rectangle::new(
                [(start, y - 0.32), (start + value, y + 0.32)],
                colour.filled(),
            )])?;
            start += value;
        }
        if plan.chosen == Some(i) {
            ctx.draw_series([Rectangle::new([(0.0, y - 0.4), (start, y + 0.4)], BLACK.stroke_width(3))])?;
        }
        let text = format!("{start:.0} MiB");
        ctx.draw_series([EmptyElement::at((start, y)) + Text::new(text, (6, 0), total_style.clone())])?;
    }
    if budget_on_scale {
        let budget = plan.budget_mib;
        ctx.draw_series(LineSeries::new([(budget, -0.5), (budget, n as f64 - 0.5)], BUDGET.stroke_width(2)))?;
        // Beside the line, on the side with more room, so that it is never cut at an edge.
        let (side, dx) = if budget < end / 2.0 { (HPos::Left, 5) } else { (HPos::Right, -5) };
        let style =
            TextStyle::from((FAMILY, 14).into_font()).color(&BUDGET).pos(Pos::new(side, VPos::Center));
        let text = format!("budget {budget:.0} MiB");
        ctx.draw_series([EmptyElement::at((budget, n as f64 - 0.22)) + Text::new(text, (dx, 0), style)])?;
    } else {
        let style =
            TextStyle::from((FAMILY, 14).into_font()).color(&BUDGET).pos(Pos::new(HPos::Right, VPos::Center));
        let text = format!("budget {:.0} MiB \u{2192}", plan.budget_mib);
        ctx.draw_series([EmptyElement::at((end, n as f64 - 0.22)) + Text::new(text, (-6, 0), style)])?;
    }
    legend(&legend_area, plan, budget_on_scale)
}

/// The legend panel: component swatches, the budget line, the chosen-rung outline.
fn legend(area: &canvas::Area, plan: &PlanChart, budget_on_scale: bool) -> DrawResult {
    let style = TextStyle::from((FAMILY, 14).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
    let mut y = 60;
    let x = 8;
    let mut line = |swatch: &dyn Fn(i32) -> DrawResult, text: String| -> DrawResult {
        swatch(y)?;
        area.draw(&Text::new(text, (x + 30, y), style.clone()))?;
        y += LEGEND_LINE;
        Ok(())
    };
    for (k, name) in components(plan) {
        let colour = COLOURS[k % COLOURS.len()];
        let swatch = |y: i32| -> DrawResult {
            Ok(area.draw(&Rectangle::new([(x, y - 7), (x + 22, y + 7)], colour.filled()))?)
        };
        line(&swatch, name.to_string())?;
    }
    let budget_swatch = |y: i32| -> DrawResult {
        Ok(area.draw(&PathElement::new(vec![(x, y), (x + 22, y)], BUDGET.stroke_width(2)))?)
    };
    let off = if budget_on_scale { "" } else { " (off scale)" };
    line(&budget_swatch, format!("budget {:.0} MiB{off}", plan.budget_mib))?;
    let chosen_swatch = |y: i32| -> DrawResult {
        Ok(area.draw(&Rectangle::new([(x + 1, y - 7), (x + 21, y + 7)], BLACK.stroke_width(3)))?)
    };
    match plan.chosen {
        Some(_) => line(&chosen_swatch, "chosen: the first rung that fits".to_string()),
        None => line(&|_| Ok(()), "no rung fits the budget".to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pixels;

    fn rung(label: &str, parts: &[(&str, f64)]) -> PlanRung {
        PlanRung { label: label.into(), components: parts.iter().map(|&(n, v)| (n.to_string(), v)).collect() }
    }

    /// Two rungs: runtime 100 + eval 50, runtime 200 + eval 0; the budget at 250 MiB.
    fn two_rungs(budget_mib: f64) -> PlanChart {
        PlanChart {
            title: "test".into(),
            budget_mib,
            rungs: vec![
                rung("start", &[("runtime", 100.0), ("eval", 50.0)]),
                rung("batch 8", &[("runtime", 200.0), ("eval", 0.0)]),
            ],
            chosen: Some(0),
        }
    }

    /// Per row, the longest run of `colour` pixels, where it is longer than any glyph's stroke
    /// (the legend's swatches are 22 wide, bars far longer).
    fn widths(image: &image::RgbImage, colour: RGBColor) -> Vec<usize> {
        (0..image.height())
            .map(|y| pixels::longest_run(image, y, pixels::rgb(colour)).1 as usize)
            .filter(|&n| n > 30)
            .collect()
    }

    #[test]
    fn bars_are_to_scale_with_their_own_colours_the_budget_line_and_the_chosen_outline() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("plan.png");
        write_plan_chart(&path, &two_rungs(250.0)).expect("chart");
        let image = pixels::open(&path);
        assert_eq!(image.width(), PLAN_WIDTH);
        assert_eq!(pixels::listing(dir.path()), ["plan.png"], "no temporaries left");

        let runtime = widths(&image, COLOURS[0]);
        let (short, long) = (runtime.iter().min().copied(), runtime.iter().max().copied());
        let (short, long) = (short.expect("runtime drawn") as f64, long.expect("runtime drawn") as f64);
        assert!((long / short - 2.0).abs() < 0.04, "runtime 200 vs 100 MiB: {long} vs {short} pixels");
        // The second component (eval here) in the second colour, half the short runtime bar.
        let eval = widths(&image, COLOURS[1]);
        let eval = eval.iter().max().copied().expect("eval drawn") as f64;
        assert!((eval / short - 0.5).abs() < 0.04, "eval 50 vs runtime 100 MiB: {eval} vs {short} pixels");
        // The budget: a vertical red line at 250 MiB, 1.25 times the unframed 200 MiB bar from 0.
        let red = pixels::columns_with(&image, pixels::rgb(BUDGET), 40);
        let grey = pixels::rgb(COLOURS[0]);
        let bar_row = pixels::rows_with(&image, grey, long as usize, 0, PLAN_WIDTH - LEGEND_WIDTH)[0];
        let zero = f64::from(pixels::longest_run(&image, bar_row, grey).0);
        let budget = pixels::centre(&red, "the budget line");
        assert!(
            (budget - (zero + 1.25 * long)).abs() <= 2.0,
            "budget at x {budget}, 0 at {zero}, 200 MiB {long} px"
        );
        // The chosen rung (150 MiB) is framed: black runs of its length above and below it, 3 px
        // thick each (the axis is a longer run, the ticks shorter).
        let framed = 0.75 * long;
        let edges = (0..image.height())
            .filter(|&y| {
                let run = f64::from(pixels::longest_run(&image, y, pixels::rgb(BLACK)).1);
                (run - framed).abs() <= 4.0
            })
            .count();
        assert!(edges >= 6, "{edges} rows hold a black run of {framed} px");
    }

    #[test]
    fn every_component_has_its_own_colour() {
        for (i, a) in COLOURS.iter().enumerate() {
            assert_ne!(*a, BUDGET, "component {i} looks like the budget");
            for b in &COLOURS[i + 1..] {
                assert_ne!(a, b, "two components share a colour");
            }
        }
    }

    #[test]
    fn a_budget_far_above_the_bars_leaves_the_scale_to_the_bars() {
        let (end, on_scale) = x_end(&two_rungs(10_000.0));
        assert!(!on_scale && (end - 200.0 * 1.18).abs() < 1e-9, "{end} {on_scale}");
        let (end, on_scale) = x_end(&two_rungs(250.0));
        assert!(on_scale && (end - 250.0 * 1.18).abs() < 1e-9, "{end} {on_scale}");
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("plan.png");
        write_plan_chart(&path, &two_rungs(10_000.0)).expect("chart");
        let image = pixels::open(&path);
        assert!(pixels::columns_with(&image, pixels::rgb(BUDGET), 40).is_empty(), "no budget line drawn");
        let long = widths(&image, COLOURS[0]).into_iter().max().expect("bars") as f64;
        let plot = f64::from(PLAN_WIDTH - LEGEND_WIDTH - 130 - 28);
        assert!(long > 0.7 * plot, "the longest bar spans {long} of about {plot} pixels");
    }

    #[test]
    fn bad_plans_are_refused_and_nothing_is_written() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("plan.png");
        let empty = PlanChart { rungs: Vec::new(), ..two_rungs(250.0) };
        let message = write_plan_chart(&path, &empty).expect_err("no rungs").to_string();
        assert!(message.contains("no rungs"), "{message}");
        let chosen = PlanChart { chosen: Some(2), ..two_rungs(250.0) };
        let message = write_plan_chart(&path, &chosen).expect_err("chosen past the end").to_string();
        assert!(message.contains("chosen rung 2") && message.contains("2 rungs"), "{message}");
        let mut negative = two_rungs(250.0);
        negative.rungs[1].components[0].1 = -1.0;
        let message = write_plan_chart(&path, &negative).expect_err("negative").to_string();
        assert!(message.contains("`batch 8`") && message.contains("`runtime`"), "{message}");
        assert!(pixels::listing(dir.path()).is_empty(), "nothing written");
    }
}
