package otelretries

import "go.opentelemetry.io/otel/metric"

// observables creates the observable instruments of one Register
// function, keeping the first error.
type observables struct {
	m   metric.Meter
	err error
}

func (o *observables) counter(name, unit, desc string) metric.Int64ObservableCounter {
	if o.err != nil {
		return nil
	}
	i, err := o.m.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
	o.err = err
	return i
}

func (o *observables) gauge(name, unit, desc string) metric.Int64ObservableGauge {
	if o.err != nil {
		return nil
	}
	i, err := o.m.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
	o.err = err
	return i
}

func (o *observables) floatCounter(name, unit, desc string) metric.Float64ObservableCounter {
	if o.err != nil {
		return nil
	}
	i, err := o.m.Float64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
	o.err = err
	return i
}
