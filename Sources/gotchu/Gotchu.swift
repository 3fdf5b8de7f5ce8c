@main struct Gotchu { static func main() {} }
