//! The memory plan as a PNG: one horizontal bar per rung of the fit ladder, stacked by component,
//! the budget as a vertical line, the chosen rung marked.

use std::path::Path;

use plotters::prelude::*;

use crate::Result;
use crate::canvas::{self, DrawResult, FAMILY};
use crate::error::invalid;

/// Width of the chart, in pixels.
pub const PLAN_WIDTH: u32 = 1000;

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

/// Draws `plan` to `path` (PNG, written atomically): a bar per rung, its estimated peak split by
/// component in MiB.
///
/// Errors: no rungs, a chosen index past the rungs, or a negative or non-finite value, before
/// anything is written; a file that cannot be drawn or written.
pub fn write_plan_chart(path: &Path, plan: &PlanChart) -> Result<()> {
    check(plan)?;
    let height = 140 + 34 * plan.rungs.len() as u32;
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

fn render(root: &canvas::Area, plan: &PlanChart) -> DrawResult {
    let n = plan.rungs.len();
    let peak = |r: &PlanRung| r.components.iter().map(|(_, v)| v).sum::<f64>();
    let top = plan.rungs.iter().map(peak).fold(plan.budget_mib, f64::max) * 1.08;
    let mut ctx = ChartBuilder::on(root)
        .caption(&plan.title, (FAMILY, 22))
        .margin(14)
        .x_label_area_size(40)
        .y_label_area_size(150)
        .build_cartesian_2d(0f64..top.max(1.0), -0.5f64..(n as f64 - 0.5))?;
    let label = |y: &f64| {
        let i = y.round();
        if (y - i).abs() < 1e-6 && i >= 0.0 {
            plan.rungs.get(n - 1 - i as usize).map(|r| r.label.clone()).unwrap_or_default()
        } else {
            String::new()
        }
    };
    ctx.configure_mesh()
        .x_desc("estimated peak, MiB")
        .y_labels(n * 2 + 1)
        .y_label_formatter(&label)
        .label_style((FAMILY, 13))
        .disable_y_mesh()
        .draw()?;
    for (i, rung) in plan.rungs.iter().enumerate() {
        let y = (n - 1 - i) as f64;
        let mut start = 0.0;
        for (k, (_, value)) in rung.components.iter().enumerate() {
            let colour = canvas::TAB10[k % canvas::TAB10.len()];
            ctx.draw_series([Rectangle::new(
                [(start, y - 0.35), (start + value, y + 0.35)],
                colour.filled(),
            )])?;
            start += value;
        }
    }
    let budget = plan.budget_mib;
    ctx.draw_series(LineSeries::new([(budget, -0.5), (budget, n as f64 - 0.5)], RED.stroke_width(2)))?;
    Ok(())
}
