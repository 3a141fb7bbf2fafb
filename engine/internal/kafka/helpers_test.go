package kafka_test

import "github.com/rewind-io/rewind/engine"

// engineKafka is the listener configuration of the tests: the defaults.
func engineKafka() engine.KafkaConfig { return engine.KafkaConfig{} }
