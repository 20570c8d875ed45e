//! Geometry checks on the SVG figures the project writes (shared by the experiment and CLI
//! tests): the file parses as a renderable SVG tree (usvg), and from its elements (roxmltree)
//! the bars, the legend frame and the text labels are found with their boxes.

#![allow(dead_code)]

/// An axis-aligned box, px.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bx {
    pub x0: f64,
    pub y0: f64,
    pub x1: f64,
    pub y1: f64,
}

impl Bx {
    pub fn overlaps(&self, o: &Bx) -> bool {
        self.x0 < o.x1 && o.x0 < self.x1 && self.y0 < o.y1 && o.y0 < self.y1
    }
    pub fn contains(&self, x: f64, y: f64) -> bool {
        self.x0 <= x && x <= self.x1 && self.y0 <= y && y <= self.y1
    }
}

/// What a figure is made of.
#[derive(Debug, Default)]
pub struct Figure {
    pub width: f64,
    pub height: f64,
    /// Filled rectangles (bars and legend swatches), with their fill colour.
    pub filled: Vec<(Bx, String)>,
    /// Unfilled stroked rectangles (legend frames, plot frames).
    pub frames: Vec<Bx>,
    /// Text elements: content and anchor point.
    pub texts: Vec<(String, f64, f64)>,
    /// Polylines' boxes (lines of line charts, axes, error bars).
    pub polylines: Vec<Bx>,
}

fn num(n: &roxmltree::Node, a: &str) -> f64 {
    n.attribute(a)
        .and_then(|v| v.trim_end_matches("px").parse().ok())
        .unwrap_or(0.0)
}

/// Parse `svg`: it must load as a usvg tree of the declared size, and every drawn element
/// must lie inside the canvas.
pub fn parse(svg: &str) -> Figure {
    let tree = usvg::Tree::from_str(svg, &usvg::Options::default()).expect("usvg parses the SVG");
    let doc = roxmltree::Document::parse(svg).expect("well-formed XML");
    let root = doc.root_element();
    let mut f = Figure {
        width: num(&root, "width"),
        height: num(&root, "height"),
        ..Default::default()
    };
    assert_eq!(tree.size().width() as f64, f.width);
    assert_eq!(tree.size().height() as f64, f.height);
    let bb = tree.root().abs_bounding_box();
    assert!(
        bb.left() >= -1.0
            && bb.top() >= -1.0
            && bb.right() <= f.width as f32 + 1.0
            && bb.bottom() <= f.height as f32 + 1.0,
        "drawing outside the canvas: {bb:?}"
    );
    for n in doc.descendants().filter(|n| n.is_element()) {
        match n.tag_name().name() {
            "rect" => {
                let (x, y, w, h) = (
                    num(&n, "x"),
                    num(&n, "y"),
                    num(&n, "width"),
                    num(&n, "height"),
                );
                let b = Bx {
                    x0: x,
                    y0: y,
                    x1: x + w,
                    y1: y + h,
                };
                let fill = n.attribute("fill").unwrap_or("none").to_string();
                if fill == "none" {
                    f.frames.push(b);
                } else if !(w >= f.width - 1.0 && h >= f.height - 1.0) {
                    // (the white background is not a bar)
                    f.filled.push((b, fill));
                }
            }
            "text" => {
                let t: String = n.children().filter_map(|c| c.text()).collect();
                f.texts
                    .push((t.trim().to_string(), num(&n, "x"), num(&n, "y")));
            }
            "polyline" | "path" => {
                let pts: Vec<f64> = n
                    .attribute("points")
                    .unwrap_or("")
                    .split(|c: char| c == ',' || c.is_whitespace())
                    .filter_map(|v| v.parse().ok())
                    .collect();
                if pts.len() >= 2 {
                    let xs = pts.iter().step_by(2);
                    let ys = pts.iter().skip(1).step_by(2);
                    f.polylines.push(Bx {
                        x0: xs.clone().copied().fold(f64::INFINITY, f64::min),
                        x1: xs.copied().fold(f64::NEG_INFINITY, f64::max),
                        y0: ys.clone().copied().fold(f64::INFINITY, f64::min),
                        y1: ys.copied().fold(f64::NEG_INFINITY, f64::max),
                    });
                }
            }
            _ => {}
        }
    }
    f
}

impl Figure {
    /// The text element whose content is `s`.
    pub fn text(&self, s: &str) -> Option<(f64, f64)> {
        self.texts.iter().find(|t| t.0 == s).map(|t| (t.1, t.2))
    }

    /// The legend frame: the unfilled rectangle holding every one of `names`.
    pub fn legend(&self, names: &[&str]) -> Bx {
        let pts: Vec<(f64, f64)> = names
            .iter()
            .map(|n| {
                self.text(n)
                    .unwrap_or_else(|| panic!("legend entry {n:?} missing"))
            })
            .collect();
        *self
            .frames
            .iter()
            .filter(|b| pts.iter().all(|&(x, y)| b.contains(x, y)))
            .min_by(|a, b| {
                ((a.x1 - a.x0) * (a.y1 - a.y0)).total_cmp(&((b.x1 - b.x0) * (b.y1 - b.y0)))
            })
            .expect("a frame around the legend entries")
    }

    /// The legend frame found without knowing the series: the smallest unfilled rectangle
    /// holding a 14 px swatch (`report::draw_legend`'s), if any.
    pub fn legend_auto(&self) -> Option<Bx> {
        let swatch =
            |b: &Bx| ((b.x1 - b.x0) - 14.0).abs() < 0.5 && ((b.y1 - b.y0) - 14.0).abs() < 0.5;
        self.frames
            .iter()
            .filter(|fr| {
                self.filled
                    .iter()
                    .any(|(b, _)| swatch(b) && fr.contains(b.x0, b.y0) && fr.contains(b.x1, b.y1))
            })
            .min_by(|a, b| {
                ((a.x1 - a.x0) * (a.y1 - a.y0)).total_cmp(&((b.x1 - b.x0) * (b.y1 - b.y0)))
            })
            .copied()
    }

    /// The bars: every filled rectangle but the legend's swatches (exactly one per entry
    /// fully inside the frame; a bar inside the frame would make one too many).
    pub fn bars(&self, legend: &Bx, entries: usize) -> Vec<Bx> {
        let inside = |b: &Bx| legend.contains(b.x0, b.y0) && legend.contains(b.x1, b.y1);
        let swatches = self.filled.iter().filter(|(b, _)| inside(b)).count();
        assert_eq!(swatches, entries, "filled shapes inside the legend frame");
        self.filled
            .iter()
            .map(|(b, _)| *b)
            .filter(|b| !inside(b))
            .collect()
    }

    /// The checks every bar chart must pass: the legend's frame overlaps no bar and lies
    /// right of every bar and of the axes; each category is named below the bars.
    pub fn check_bar_chart(&self, series: &[&str], categories: &[&str]) {
        let legend = self.legend(series);
        let bars = self.bars(&legend, series.len());
        assert!(!bars.is_empty(), "no bars");
        for b in &bars {
            assert!(!legend.overlaps(b), "legend {legend:?} overlaps bar {b:?}");
            assert!(
                b.x1 <= legend.x0,
                "bar {b:?} reaches the legend column {legend:?}"
            );
        }
        for p in &self.polylines {
            assert!(
                p.x1 <= legend.x0,
                "axis or line {p:?} reaches the legend {legend:?}"
            );
        }
        let lowest = bars.iter().map(|b| b.y1).fold(f64::NEG_INFINITY, f64::max);
        for c in categories {
            let (_, y) = self
                .text(c)
                .unwrap_or_else(|| panic!("category {c:?} is not named on the axis"));
            assert!(
                y >= lowest,
                "category {c:?} label at y {y} is inside the bars (lowest {lowest})"
            );
        }
    }
}
