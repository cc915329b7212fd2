package resume

// The checkpoint file's envelope, for the external tests.
var (
	WriteEnvelope = writeEnvelope
	ReadEnvelope  = readEnvelope
)

const EnvelopeVersion = envelopeVersion
