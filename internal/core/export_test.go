package core

// PipeLanes is pipeLanes, for the tests.
const PipeLanes = pipeLanes
