package bench

import (
	"encoding/json"
	"fmt"
	"math"
)

// JSON has no NaN or infinity; charts use NaN for "not measured". On the
// wire such values are null.

func nullable(xs []float64) []*float64 {
	if xs == nil {
		return nil
	}
	out := make([]*float64, len(xs))
	for i, x := range xs {
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			out[i] = &xs[i]
		}
	}
	return out
}

func fromNullable(xs []*float64) []float64 {
	if xs == nil {
		return nil
	}
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = math.NaN()
		if x != nil {
			out[i] = *x
		}
	}
	return out
}

type seriesJSON struct {
	Name   string       `json:"name"`
	Values [][]*float64 `json:"values,omitempty"`
	X      []*float64   `json:"x,omitempty"`
	Y      []*float64   `json:"y,omitempty"`
}

// MarshalJSON writes non-finite values as null.
func (s Series) MarshalJSON() ([]byte, error) {
	j := seriesJSON{Name: s.Name, X: nullable(s.X), Y: nullable(s.Y)}
	for _, v := range s.Values {
		j.Values = append(j.Values, nullable(v))
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads nulls back as NaN.
func (s *Series) UnmarshalJSON(b []byte) error {
	var j seriesJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*s = Series{Name: j.Name, X: fromNullable(j.X), Y: fromNullable(j.Y)}
	for _, v := range j.Values {
		s.Values = append(s.Values, fromNullable(v))
	}
	return nil
}

type chartAlias Chart

type chartJSON struct {
	chartAlias
	Grid [][]*float64 `json:"grid,omitempty"`
}

// MarshalJSON writes non-finite grid cells as null.
func (c Chart) MarshalJSON() ([]byte, error) {
	j := chartJSON{chartAlias: chartAlias(c)}
	j.chartAlias.Grid = nil
	for _, row := range c.Grid {
		j.Grid = append(j.Grid, nullable(row))
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads null grid cells back as NaN.
func (c *Chart) UnmarshalJSON(b []byte) error {
	var j chartJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*c = Chart(j.chartAlias)
	c.Grid = nil
	for _, row := range j.Grid {
		c.Grid = append(c.Grid, fromNullable(row))
	}
	return nil
}

// NotApplicable is a table cell whose figure does not apply to its row
// (the batch's CPUs where the service ran alone) or was not measured: "-"
// in text and HTML, null in JSON.
const NotApplicable = "-"

// cell formats v for a table, NotApplicable when it is not a number.
func cell(format string, v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return NotApplicable
	}
	return fmt.Sprintf(format, v)
}

type tableAlias Table

type tableJSON struct {
	tableAlias
	Rows [][]*string `json:"rows"`
}

// MarshalJSON writes NotApplicable cells as null.
func (t Table) MarshalJSON() ([]byte, error) {
	j := tableJSON{tableAlias: tableAlias(t), Rows: make([][]*string, 0, len(t.Rows))}
	j.tableAlias.Rows = nil
	for _, row := range t.Rows {
		out := make([]*string, len(row))
		for i := range row {
			if row[i] != NotApplicable {
				out[i] = &row[i]
			}
		}
		j.Rows = append(j.Rows, out)
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads null cells back as NotApplicable.
func (t *Table) UnmarshalJSON(b []byte) error {
	var j tableJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*t = Table(j.tableAlias)
	t.Rows = nil
	for _, row := range j.Rows {
		out := make([]string, len(row))
		for i, c := range row {
			out[i] = NotApplicable
			if c != nil {
				out[i] = *c
			}
		}
		t.Rows = append(t.Rows, out)
	}
	return nil
}
