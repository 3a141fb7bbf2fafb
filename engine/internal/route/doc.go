// Package route owns every hop from a node to another member: finding a
// partition's leader, following hints, relaying, classifying what came
// back, and the peer clients that carry the calls.
package route
