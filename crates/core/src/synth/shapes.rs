//! Labelled objects (circle, square, triangle) and unlabelled distractors (lines, rings, ellipses).

use image::{GrayImage, Luma, Rgb, RgbImage};
use imageproc::drawing::{draw_filled_circle_mut, draw_polygon_mut};
use imageproc::point::Point;
use rand::RngExt;

use super::SynthRng;
use super::math::{chance, hsv, luma, sin_cos_turns, uniform, uniform_int};
use super::preset::PresetParams;
use crate::boxes::Xyxy;
use crate::dataset::labels::YoloLabel;

/// Class ids, in the order of [`super::CLASS_NAMES`].
const CIRCLE: usize = 0;
const SQUARE: usize = 1;
const TRIANGLE: usize = 2;

/// Placement attempts per object before it is dropped.
const PLACEMENT_TRIES: u32 = 12;

/// An object whose position is fixed; it is drawn later.
struct Placed {
    class: usize,
    cx: f32,
    cy: f32,
    /// Circumradius in pixels.
    radius: f32,
}

impl Placed {
    fn bounds(&self) -> Xyxy {
        Xyxy::new(self.cx - self.radius, self.cy - self.radius, self.cx + self.radius, self.cy + self.radius)
    }
}

/// Colour and shading of a drawn object.
struct Paint {
    colour: [f32; 3],
    /// Direction (sin, cos) and strength of a light falloff across the object.
    shade: (f32, f32, f32),
}

/// Draws `params.distractors` unlabelled shapes on `image`.
pub(crate) fn draw_distractors(image: &mut RgbImage, params: &PresetParams, rng: &mut SynthRng) {
    let (width, height) = image.dimensions();
    let short_side = width.min(height) as f32;
    for _ in 0..uniform_int(rng, params.distractors) {
        let colour = Rgb(hsv(rng.random(), uniform(rng, (0.2, 0.9)), uniform(rng, (0.15, 0.95))).map(to_u8));
        let (cx, cy) = (uniform(rng, (0.0, width as f32)), uniform(rng, (0.0, height as f32)));
        let radius = uniform(rng, params.object_size) * short_side * uniform(rng, (0.4, 0.65));
        match uniform_int(rng, (0, 2)) {
            0 => {
                let length = uniform(rng, (0.3, 1.0)) * short_side;
                let thickness = uniform(rng, (1.0, 4.0));
                let (sin, cos) = sin_cos_turns(rng.random());
                let (hx, hy, nx, ny) =
                    (cos * length / 2.0, sin * length / 2.0, -sin * thickness / 2.0, cos * thickness / 2.0);
                let corners =
                    [(hx + nx, hy + ny), (hx - nx, hy - ny), (-hx - nx, -hy - ny), (-hx + nx, -hy + ny)];
                fill_polygon(image, &corners.map(|(x, y)| (cx + x, cy + y)), colour);
            }
            1 => {
                let thickness = (radius * uniform(rng, (0.1, 0.3))).max(1.5);
                draw_ring(image, (cx, cy), radius, thickness, colour);
            }
            _ => {
                let minor = radius / uniform(rng, (2.2, 4.0));
                let (sin, cos) = sin_cos_turns(rng.random());
                let points: [(f32, f32); 24] = std::array::from_fn(|k| {
                    let (s, c) = sin_cos_turns(k as f32 / 24.0);
                    let (x, y) = (c * radius, s * minor);
                    (cx + x * cos - y * sin, cy + x * sin + y * cos)
                });
                fill_polygon(image, &points, colour);
            }
        }
    }
}

/// Places and draws the labelled objects on `image`; returns their labels: the tight box of the
/// pixels of each object that remain visible, clipped to the image.
pub(crate) fn draw_objects(
    image: &mut RgbImage,
    params: &PresetParams,
    rng: &mut SynthRng,
) -> Vec<YoloLabel> {
    let placed = place_objects(image.dimensions(), params, rng);
    let (width, height) = image.dimensions();
    let mut ids = GrayImage::new(width, height);
    let mut paints = Vec::with_capacity(placed.len());
    for (k, object) in placed.iter().enumerate() {
        // `place_objects` makes at most `u8::MAX - 1` objects, so the id fits.
        let id = Luma([(k + 1).min(255) as u8]);
        draw_shape(&mut ids, object, id, rng);
        let background = mean_luma(image, object.bounds());
        let colour = contrasting_colour(background, params, rng);
        let (sin, cos) = sin_cos_turns(rng.random());
        paints.push(Paint { colour, shade: (sin, cos, uniform(rng, (0.0, 0.25))) });
    }
    composite(image, &ids, &placed, &paints);
    visible_boxes(&ids, placed.len())
        .into_iter()
        .zip(&placed)
        .filter_map(|(bounds, object)| bounds.map(|b| YoloLabel::from_pixels(object.class, b, width, height)))
        .collect()
}

/// Chooses class, size and position of each object so that no two overlap by more than
/// `params.max_overlap` of the smaller box and at most half the radius leaves the image.
fn place_objects((width, height): (u32, u32), params: &PresetParams, rng: &mut SynthRng) -> Vec<Placed> {
    if chance(rng, params.empty_image_chance) {
        return Vec::new();
    }
    let short_side = width.min(height) as f32;
    let count = uniform_int(rng, params.objects).min(u32::from(u8::MAX) - 1);
    let mut placed: Vec<Placed> = Vec::with_capacity(count as usize);
    for _ in 0..count {
        for _ in 0..PLACEMENT_TRIES {
            let class = uniform_int(rng, (0, 2)) as usize;
            let size = uniform(rng, params.object_size) * short_side;
            // Circumradius: a circle of diameter `size`; a square of side 0.85·size; a triangle of
            // side 1.05·size (so the three have similar areas).
            let radius = match class {
                CIRCLE => size / 2.0,
                SQUARE => size * 0.85 / std::f32::consts::SQRT_2,
                _ => size * 1.05 / 1.732_050_8,
            };
            let margin = radius / 2.0;
            let cx = uniform(rng, (margin, width as f32 - margin));
            let cy = uniform(rng, (margin, height as f32 - margin));
            let candidate = Placed { class, cx, cy, radius };
            let b = candidate.bounds();
            let fits = placed.iter().all(|other| {
                let o = other.bounds();
                b.intersection(o) <= params.max_overlap * b.area().min(o.area())
            });
            if fits {
                placed.push(candidate);
                break;
            }
        }
    }
    placed
}

/// Draws the silhouette of `object` into the id map with value `id`.
fn draw_shape(ids: &mut GrayImage, object: &Placed, id: Luma<u8>, rng: &mut SynthRng) {
    let rotation: f32 = rng.random();
    let vertices = match object.class {
        CIRCLE => {
            let centre = (object.cx.round() as i32, object.cy.round() as i32);
            draw_filled_circle_mut(ids, centre, object.radius.round() as i32, id);
            return;
        }
        SQUARE => 4,
        _ => 3,
    };
    let points: Vec<(f32, f32)> = (0..vertices)
        .map(|k| {
            let (sin, cos) = sin_cos_turns(rotation + k as f32 / vertices as f32);
            // Triangles get a little irregularity; squares stay square.
            let r = if object.class == TRIANGLE {
                object.radius * uniform(rng, (0.92, 1.06))
            } else {
                object.radius
            };
            (object.cx + r * cos, object.cy + r * sin)
        })
        .collect();
    fill_polygon(ids, &points, id);
}

/// A colour whose luma differs from `background` by at least `params.min_object_contrast`
/// (after a few random tries, black or white, whichever is further).
fn contrasting_colour(background: f32, params: &PresetParams, rng: &mut SynthRng) -> [f32; 3] {
    for _ in 0..8 {
        let colour = hsv(rng.random(), uniform(rng, params.object_saturation), uniform(rng, (0.1, 1.0)));
        if (luma(colour) - background).abs() >= params.min_object_contrast {
            return colour;
        }
    }
    if background > 127.5 { [20.0, 20.0, 20.0] } else { [235.0, 235.0, 235.0] }
}

/// Paints every pixel of the id map that belongs to an object, with that object's shading.
fn composite(image: &mut RgbImage, ids: &GrayImage, placed: &[Placed], paints: &[Paint]) {
    for (x, y, id) in ids.enumerate_pixels() {
        let Some(k) = (id.0[0] as usize).checked_sub(1) else { continue };
        let (Some(object), Some(paint)) = (placed.get(k), paints.get(k)) else { continue };
        let (sin, cos, strength) = paint.shade;
        let along = ((x as f32 + 0.5 - object.cx) * cos + (y as f32 + 0.5 - object.cy) * sin) / object.radius;
        let gain = 1.0 + strength * along.clamp(-1.0, 1.0);
        image.put_pixel(x, y, Rgb(paint.colour.map(|c| to_u8(c * gain))));
    }
}

/// The pixel box (end-exclusive) of each id `1..=count` in the id map, `None` if none is visible.
fn visible_boxes(ids: &GrayImage, count: usize) -> Vec<Option<Xyxy>> {
    let mut bounds: Vec<Option<[u32; 4]>> = vec![None; count];
    for (x, y, id) in ids.enumerate_pixels() {
        let Some(slot) = (id.0[0] as usize).checked_sub(1).and_then(|k| bounds.get_mut(k)) else { continue };
        *slot = Some(match *slot {
            None => [x, y, x, y],
            Some([x1, y1, x2, y2]) => [x1.min(x), y1.min(y), x2.max(x), y2.max(y)],
        });
    }
    bounds
        .into_iter()
        .map(|b| b.map(|[x1, y1, x2, y2]| Xyxy::new(x1 as f32, y1 as f32, (x2 + 1) as f32, (y2 + 1) as f32)))
        .collect()
}

/// Mean luma of `image` inside `bounds` (clipped); mid-grey if the box misses the image.
fn mean_luma(image: &RgbImage, bounds: Xyxy) -> f32 {
    let (width, height) = image.dimensions();
    let b = bounds.clip(width as f32, height as f32);
    let (x1, y1, x2, y2) = (b.x1 as u32, b.y1 as u32, b.x2.ceil() as u32, b.y2.ceil() as u32);
    let (mut sum, mut n) = (0.0, 0u32);
    for y in y1..y2.min(height) {
        for x in x1..x2.min(width) {
            sum += luma(image.get_pixel(x, y).0.map(f32::from));
            n += 1;
        }
    }
    if n == 0 { 127.5 } else { sum / n as f32 }
}

/// An annulus of outer radius `radius` and the given thickness, centred at `centre`.
fn draw_ring(image: &mut RgbImage, (cx, cy): (f32, f32), radius: f32, thickness: f32, colour: Rgb<u8>) {
    let (width, height) = image.dimensions();
    let (outer, inner) = (radius * radius, (radius - thickness).max(0.0).powi(2));
    let x_range = (cx - radius).floor().max(0.0) as u32..((cx + radius).ceil().max(0.0) as u32).min(width);
    let y_range = (cy - radius).floor().max(0.0) as u32..((cy + radius).ceil().max(0.0) as u32).min(height);
    for y in y_range {
        for x in x_range.clone() {
            let (dx, dy) = (x as f32 + 0.5 - cx, y as f32 + 0.5 - cy);
            let d2 = dx * dx + dy * dy;
            if d2 <= outer && d2 >= inner {
                image.put_pixel(x, y, colour);
            }
        }
    }
}

/// Fills a polygon given by float vertices (rounded to pixels; repeated vertices removed, as
/// imageproc rejects a closed path).
fn fill_polygon<C: imageproc::drawing::Canvas>(canvas: &mut C, points: &[(f32, f32)], colour: C::Pixel) {
    let mut vertices: Vec<Point<i32>> = Vec::with_capacity(points.len());
    for &(x, y) in points {
        let p = Point::new(x.round() as i32, y.round() as i32);
        if vertices.last() != Some(&p) {
            vertices.push(p);
        }
    }
    while vertices.len() > 1 && vertices.first() == vertices.last() {
        vertices.pop();
    }
    if !vertices.is_empty() {
        draw_polygon_mut(canvas, &vertices, colour);
    }
}

fn to_u8(value: f32) -> u8 {
    value.round().clamp(0.0, 255.0) as u8
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::Preset;
    use rand::SeedableRng;

    /// On a flat background without camera effects, every pixel that changed lies in a label
    /// box, and every box edge touches a changed pixel (the boxes are tight).
    #[test]
    fn labels_are_tight_boxes_of_the_drawn_pixels() {
        for seed in 0..40 {
            let mut rng = SynthRng::seed_from_u64(seed);
            let (width, height) = (96, 64);
            let background = Rgb([128u8, 128, 128]);
            let mut image = RgbImage::from_pixel(width, height, background);
            let labels = draw_objects(&mut image, Preset::Field.params(), &mut rng);
            let boxes: Vec<[u32; 4]> = labels
                .iter()
                .map(|l| {
                    let b = l.to_pixels(width, height);
                    [b.x1, b.y1, b.x2, b.y2].map(|v| v.round() as u32)
                })
                .collect();
            let changed = |x: u32, y: u32| image.get_pixel(x, y) != &background;
            for (x, y, _) in image.enumerate_pixels().filter(|(x, y, _)| changed(*x, *y)) {
                assert!(boxes.iter().any(|b| x >= b[0] && x < b[2] && y >= b[1] && y < b[3]), "seed {seed}");
            }
            for [x1, y1, x2, y2] in boxes {
                assert!(
                    (y1..y2).any(|y| changed(x1, y)) && (y1..y2).any(|y| changed(x2 - 1, y)),
                    "seed {seed}"
                );
                assert!(
                    (x1..x2).any(|x| changed(x, y1)) && (x1..x2).any(|x| changed(x, y2 - 1)),
                    "seed {seed}"
                );
            }
        }
    }

    #[test]
    fn distractors_draw_something_and_never_panic_on_tiny_images() {
        for seed in 0..20 {
            let mut rng = SynthRng::seed_from_u64(seed);
            let mut image = RgbImage::new(3, 2);
            draw_distractors(&mut image, Preset::Field.params(), &mut rng);
            let _ = draw_objects(&mut image, Preset::Field.params(), &mut rng);
        }
        let mut rng = SynthRng::seed_from_u64(5);
        let mut image = RgbImage::new(64, 64);
        draw_distractors(&mut image, Preset::Field.params(), &mut rng);
        assert!(image.pixels().any(|p| p.0 != [0, 0, 0]));
    }
}
