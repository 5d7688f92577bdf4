// Package render draws what package bench measured and concluded: the
// terminal summary (WriteText), the charts as inline SVG (RenderChart) and
// the self-contained HTML report (WriteHTML), like vegeta's lib/plot apart
// from lib. It is fed a bench.Report alone, which carries the run's stored
// experiment.Params, so a report rebuilt from the results database renders
// exactly as the run's did. It measures and decides nothing.
package render
